# frozen_string_literal: true
#
# escapes.rb - names that would drive a terminal: a thread and methods whose
# names hold ESC sequences (colour, window title, clear screen), CR, LF, BEL
# and a C1 control (U+009B, CSI), as a program may name them with
# define_method.  rbpeek must show them escaped ("\e[31m"), never raw.
require_relative "ready"

EVIL_METHOD = "evil\e[31mRED\e]0;pwned\a\e[2J\rcr\nlf\u009b"
EVIL_THREAD = "thr\e[32mGREEN\r\nx\a"

Object.define_method(EVIL_METHOD) { i = 0; i += 1 while i < 50_000 }
Object.define_method("#{EVIL_METHOD}_t") { i = 0; i += 1 while i < 50_000 }
Thread.new do
  Thread.current.name = EVIL_THREAD
  loop { send("#{EVIL_METHOD}_t") }
end
RecordTarget.ready!
loop { send(EVIL_METHOD) }
