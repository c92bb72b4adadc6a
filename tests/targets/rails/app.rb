# frozen_string_literal: true
#
# app.rb - a small Rails application in one file, for the field test
# (tests/e2e/69-rails.rb): Debian's ruby-rails (6.1) and ruby-sqlite3, no
# Gemfile.  A Post model in an SQLite database (RAILS_DB, made and filled
# at boot, before puma forks its workers), a controller with a JSON index, a show rendering a template,
# and an endpoint reading ENV.fetch (the tracer's names).  config.ru runs
# it under puma; `ruby app.rb N` serves N requests in-process (for trace).
require "logger"
require "rails"
require "active_record/railtie"
require "action_controller/railtie"
require "action_view/railtie"

# RAILS_DB: the database file (puma's workers share it); by default one in
# memory (one process, one thread: `ruby app.rb N`)
ENV["DATABASE_URL"] = ENV["RAILS_DB"] ? "sqlite3:#{ENV['RAILS_DB']}?pool=16" : "sqlite3::memory:"

class FieldApp < Rails::Application
  config.root = __dir__
  config.eager_load = false
  config.secret_key_base = "f" * 64
  config.logger = Logger.new(nil)
  config.log_level = :error
  config.hosts.clear
  config.active_record.legacy_connection_handling = false if config.active_record.respond_to?(:legacy_connection_handling=)
end

FieldApp.initialize!
ActiveRecord::Migration.verbose = false
ActiveRecord::Schema.define do
  create_table :posts, force: true do |t|
    t.string :title
    t.text :body
    t.integer :views, default: 0
    t.timestamps
  end
end

class Post < ActiveRecord::Base
  validates :title, presence: true
  def summary = "#{title}: #{body.to_s[0, 40]}"
end

Post.transaction do
  50.times { |i| Post.create!(title: "post #{i}", body: "body of post #{i} " * 20) }
end

class PostsController < ActionController::Base
  def index
    posts = Post.order(:id).limit(20).map { |p| { id: p.id, title: p.title, summary: p.summary } }
    render json: { posts: posts, home: ENV.fetch("HOME", "/") }
  end

  def show
    @post = Post.find(params[:id])
    render inline: "<h1><%= @post.title %></h1><p><%= @post.body %></p><% 5.times do |i| %><i><%= i %></i><% end %>"
  end
end

FieldApp.routes.draw do
  get "/posts" => "posts#index"
  get "/posts/:id" => "posts#show"
  get "/" => "posts#index"
end

if $PROGRAM_NAME == __FILE__
  req = Rack::MockRequest.new(FieldApp)
  Integer(ARGV[0] || 1).times do |i|
    res = req.get(i.even? ? "/posts" : "/posts/#{1 + i % 50}")
    raise "status #{res.status}: #{res.body[0, 300]}" unless res.status == 200
  end
end
