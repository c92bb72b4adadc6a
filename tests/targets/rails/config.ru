# config.ru - app.rb under puma (tests/e2e/69-rails.rb).
require_relative "app"
run FieldApp
