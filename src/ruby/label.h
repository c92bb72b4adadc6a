/*
 * label.h - composing frame labels as a Ruby developer writes them.
 */
#ifndef RBP_RUBY_LABEL_H
#define RBP_RUBY_LABEL_H

#include <stddef.h>

/*
 * Qualify Ruby's own label with the method owner's prefix ("Foo::Bar#" or
 * "Foo."): the base label (the method name) at the end of the label gets
 * the prefix in front of it.
 *   ("baz", "baz", "Foo#")                        -> "Foo#baz"
 *   ("block (2 levels) in baz", "baz", "Foo.")    -> "block (2 levels) in Foo.baz"
 *   ("rescue in baz", "baz", "")                  -> "rescue in baz"
 * Returns 0, or -1 when the label does not end with the base label or the
 * result does not fit in cap bytes (buf then holds the label unchanged,
 * truncated if need be).
 */
int rbp_label_qualify(const char *label, const char *base_label, const char *prefix,
		      char *buf, size_t cap);

#endif
