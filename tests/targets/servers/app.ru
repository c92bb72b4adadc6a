# frozen_string_literal: true
#
# app.ru - a small Rack app for the server tests (tests/e2e/90-servers.rb):
# every request renders a page in `HelloApp#render_page`, which burns a
# little CPU so that workers under load spend their time there.
class HelloApp
  def call(env)
    body = render_page(env["PATH_INFO"])
    [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
  end

  def render_page(path)
    sum = 0
    20_000.times { |i| sum += i * i }
    "hello from #{Process.pid} at #{path}: #{sum}\n"
  end
end

run HelloApp.new
