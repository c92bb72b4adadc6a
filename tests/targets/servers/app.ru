# frozen_string_literal: true
#
# app.ru - a small Rack app for the server tests (tests/e2e/74-servers.rb):
# every request renders a page in `HelloApp#render_page`, which burns a
# little CPU so that workers under load spend their time there; /db also
# waits 10 ms in `HelloApp#wait_for_db`, as a request on its database would.
class HelloApp
  def call(env)
    body = render_page(env["PATH_INFO"])
    wait_for_db if env["PATH_INFO"] == "/db"
    [200, { "content-type" => "text/plain", "content-length" => body.bytesize.to_s }, [body]]
  end

  def render_page(path)
    sum = 0
    20_000.times { |i| sum += i * i }
    "hello from #{Process.pid} at #{path}: #{sum}\n"
  end

  # what a request waiting on its database looks like: blocked, no CPU
  def wait_for_db
    sleep 0.01
  end
end

run HelloApp.new
