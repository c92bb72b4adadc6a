# bench/railsish.rb [THREADS] [SECONDS] - a Rails-like target for the
# sampling benchmarks, in plain Ruby (no gem): THREADS worker threads
# (default 8, as in a puma worker) serve "requests" one after another
# while the main thread waits, each through what a framework stacks up: a
# chain of 22 middlewares, a router, a controller with callbacks around its
# action, model lookups, and a view whose partials render each other.  A
# request's stack is 60-100 frames deep; the code spans ~1,000 distinct
# methods in ~150 files (generated here, each with its own path), of which
# each request reaches a different part, so new labels and line tables keep
# appearing for a while, as in a real application.  The leaves build
# strings, hashes and JSON, and a request now and then waits on a
# "database" (sleep), so threads hand the GVL to each other all the time.
# Prints "ready" once every worker is serving; runs SECONDS (default: until
# killed).  With RAILSISH_COUNT=FILE, SIGUSR1 writes the number of requests
# served so far to FILE (bench/alloc.rb measures the speed with it).
require "json"

THREADS = Integer(ARGV[0] || 8)
SECONDS = Float(ARGV[1] || 0)
MIDDLEWARES = 22
CONTROLLERS = 24
ACTIONS = 6
MODELS = 30
PARTIALS = 12

module Framework; end
module App; end

# Middlewares: M00 calls M01 ... calls the router; each in its own file.
MIDDLEWARES.times do |i|
  Framework.module_eval(<<~RUBY, "framework/middleware/m#{format('%02d', i)}.rb", 1)
    class M#{format('%02d', i)}
      def initialize(app) = @app = app

      def call(env)
        env[:trail] << #{i}
        status, body = around_#{i}(env) { @app.call(env) }
        [status, body]
      end

      def around_#{i}(env)
        env[:mw] = #{i} if env[:id] % #{i + 3} == 0
        yield
      end
    end
  RUBY
end

# Models: each with a few finders and attribute readers.
MODELS.times do |m|
  App.module_eval(<<~RUBY, "app/models/model#{m}.rb", 1)
    class Model#{m}
      ATTRS = %i[#{(0...8).map { |a| "a#{a}" }.join(' ')}]
      attr_reader(*ATTRS)

      def self.find(id)
        rec = new
        ATTRS.each_with_index { |a, k| rec.instance_variable_set("@\#{a}", id * 31 + k * #{m + 1}) }
        rec
      end

      def self.where(n) = (1..n).map { |id| find(id) }

      def to_h = ATTRS.to_h { |a| [a, public_send(a)] }

      def score = ATTRS.sum { |a| public_send(a) % 97 }
    end
  RUBY
end

# Partials: a partial renders its items, each item the next partial.
PARTIALS.times do |p|
  App.module_eval(<<~RUBY, "app/views/partial#{p}.rb", 1)
    module Partial#{p}
      def self.render(records, depth)
        out = +""
        records.each_with_index do |rec, k|
          out << "<li>" << rec.to_h.map { |key, v| "\#{key}=\#{v}" }.join(",") << "</li>"
          out << Partial#{(p + 1) % PARTIALS}.render(records.first(2), depth - 1) if depth > 0 && k.zero?
        end
        out
      end
    end
  RUBY
end

# Controllers: callbacks around each action; actions use models and views.
CONTROLLERS.times do |c|
  actions = (0...ACTIONS).map do |a|
    model = (c * ACTIONS + a) % MODELS
    <<~RUBY
      def action#{a}(params)
        records = App::Model#{model}.where(#{2 + a})
        total = records.sum(&:score)
        sleep 0.0005 if params[:id] % 5 == 0   # the database
        html = App::Partial#{(c + a) % PARTIALS}.render(records, #{3 + a % 4})
        JSON.generate({ total: total, size: html.size, rows: records.map(&:to_h) })
      end
    RUBY
  end.join("\n")
  App.module_eval(<<~RUBY, "app/controllers/controller#{c}.rb", 1)
    class Controller#{c}
      def process(name, params)
        run_callbacks(:before) do
          run_callbacks(:around) { public_send(name, params) }
        end
      end

      def run_callbacks(kind)
        @log = [kind]
        yield
      end

      #{actions}
    end
  RUBY
end

module Framework
  class Router
    def call(env)
      c = env[:id] % CONTROLLERS
      a = (env[:id] / CONTROLLERS) % ACTIONS
      body = dispatch(App.const_get("Controller#{c}"), "action#{a}", env)
      [200, body]
    end

    def dispatch(klass, action, env) = klass.new.process(action, { id: env[:id] })
  end
end

APP = (0...MIDDLEWARES).reverse_each.reduce(Framework::Router.new) do |app, i|
  Framework.const_get(format("M%02d", i)).new(app)
end

$requests = 0
if (count_file = ENV["RAILSISH_COUNT"])
  Signal.trap("USR1") do
    File.write("#{count_file}.tmp", "#{$requests}\n")
    File.rename("#{count_file}.tmp", count_file)
  end
end
served = Thread::Queue.new
workers = Array.new(THREADS) do |w|
  Thread.new do
    Thread.current.name = "worker #{w}"
    served << 1
    id = w
    loop do
      APP.call({ id: id, trail: [] })
      $requests += 1
      id += THREADS
    end
  end
end
THREADS.times { served.pop }
$stdout.puts "ready"
$stdout.flush
# the main thread waits, as a server's does
SECONDS > 0 ? sleep(SECONDS) : sleep
