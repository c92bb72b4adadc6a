# frozen_string_literal: true
#
# strings.rb - labels and paths nobody expects: a method whose name is
# 5,000 characters, one whose name is not valid UTF-8, a class with a huge
# name, a thread with a huge and invalid name, and code loaded from a file
# whose path (given as ARGV[0], made by the test) is long and holds bytes
# that are not UTF-8.  All of them keep running until killed.
require_relative "ready"

huge = "m" * 5_000
bad = "bad_\xFF\xFE_name".b
Object.const_set("K" + "x" * 3_000, Class.new do
  define_method(huge) { i = 0; i += 1 while i < 50_000 }
  define_method(bad.to_sym) { i = 0; i += 1 while i < 50_000 }
end)
klass = Object.const_get("K" + "x" * 3_000)
load ARGV[0] if ARGV[0]   # defines weird_path_work
Thread.new do
  Thread.current.name = "t" * 3_000 + "\xFF".b
  loop { weird_path_work }
end
RecordTarget.ready!
obj = klass.new
loop do
  obj.public_send(huge)
  obj.public_send(bad.to_sym)
end
