/*
 * diff.h - two recordings in one profile, for differential views.
 *
 * "What got slower?" compares the share of samples each stack (and each
 * function) has in a NEW recording against a BASE one.  Both are put into
 * one profile, function by function: frames are interned by function
 * (label, file, the function's first line, kind; a C function by its label
 * alone: its frames carry their callers' file and line), so the same stack
 * in both recordings is one node, whatever line each sample was on.  A
 * sample keeps its thread and flags and gains RBP_SAMPLE_BASE when it is
 * BASE's.  Writers that understand a diff (flame graph, summary, pprof)
 * count the two apart and compare shares, each normalised by its
 * recording's own total; the meta is NEW's.
 */
#ifndef RBP_PROFILE_DIFF_H
#define RBP_PROFILE_DIFF_H

#include "profile/profile.h"

/* A sample of the BASE recording (in a profile made by rbp_profile_diff). */
#define RBP_SAMPLE_BASE 0x80

/*
 * *out (initialised here; free with rbp_profile_free) gets the samples of
 * cur and of base (flagged RBP_SAMPLE_BASE), except those whose flags have
 * a bit of drop (RBP_SAMPLE_IDLE unless --idle).  RBP_ENOMEM.
 */
int rbp_profile_diff(const struct rbp_profile *base, const struct rbp_profile *cur, uint8_t drop,
		     struct rbp_profile *out);

/* Samples of NEW (*n_new) and of BASE (*n_base) in a diff profile. */
void rbp_diff_totals(const struct rbp_profile *p, uint64_t *n_new, uint64_t *n_base);

#endif
