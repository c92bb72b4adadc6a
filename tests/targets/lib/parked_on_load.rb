# Loaded by bodies.rb with require_relative: parks at its top level, so the
# loading thread's stack shows <top (required)> under Kernel#require_relative.
LOADED_AT = Time.now
sleep
