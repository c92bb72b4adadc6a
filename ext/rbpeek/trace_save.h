/*
 * trace_save.h - RbPeek::Trace.save (trace_save.c).
 */
#ifndef RBT_TRACE_SAVE_H
#define RBT_TRACE_SAVE_H

#include <ruby.h>

/* _save(path, format): format 0 Perfetto, 1 Chrome JSON; returns path. */
VALUE rbt_save(VALUE mod, VALUE path, VALUE fmt);

#endif
