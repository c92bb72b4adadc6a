# unicode.rb - non-ASCII method, class and module names, a non-ASCII file path
# (ünïcödé/場所.rb) and a non-ASCII thread name.  Expected stacks:
# unicode.expect.
require_relative "support/harness"
require_relative "ünïcödé/場所"

Thread.new { Ökonomie.rechne }
Größe.erstellen
