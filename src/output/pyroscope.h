/*
 * pyroscope.h - the agent's exporter for Pyroscope's HTTP ingest API:
 * POST /ingest?name=SERVICE{labels}&from=..&until=..&format=pprof&
 * sampleRate=..&spyName=rbpeek with the profile in pprof format (gzip'd
 * profile.proto, output/pprof.c) as the body.
 */
#ifndef RBP_OUTPUT_PYROSCOPE_H
#define RBP_OUTPUT_PYROSCOPE_H

#include "profile/agent.h"

extern const struct rbp_agent_exporter rbp_pyroscope_exporter;

/*
 * The request target for m into buf: "/ingest?name=...".  Characters a
 * label value cannot hold in Pyroscope's name syntax ({ } , = and
 * spaces) become '_'.  RBP_EINVAL when it does not fit.
 */
int rbp_pyroscope_target(const struct rbp_agent_meta *m, char *buf, size_t cap);

#endif
