/*
 * gvrender.c - the call graph laid out and drawn by Graphviz's library
 * (libgvc, libcgraph: the dot layout engine pprof and most profilers use),
 * as an SVG with a script that focuses a node's neighbourhood on a click.
 * Built where Graphviz is (GRAPHVIZ=1, the distro build); the static build
 * has gvrender_none.c, and -f callgraph then writes the DOT text.
 */
#include <stdlib.h>
#include <string.h>

#include <graphviz/cgraph.h>
#include <graphviz/gvc.h>

#include "output/output.h"
#include "util/err.h"

/*
 * Click a function: it, its callers and its callees stay, the rest is
 * dimmed (#focus=N in the URL); a click on it again, elsewhere or Esc shows
 * everything.  Keep it free of "]]>" (it sits in a CDATA section).
 */
static const char cg_script[] =
	"<style type=\"text/css\"><![CDATA[\n"
	"g.node { cursor: pointer; }\n"
	".dim { opacity: 0.12; }\n"
	"g.node.focus polygon, g.node.focus path { stroke: #000; stroke-width: 3; }\n"
	"]]></style>\n"
	"<script type=\"text/ecmascript\"><![CDATA[\n"
	"(function () {\n"
	"'use strict';\n"
	"var nodes = {}, edges = [], focused = null;\n"
	"document.querySelectorAll('g.node').forEach(function (g) {\n"
	"  nodes[g.querySelector('title').textContent] = g;\n"
	"});\n"
	"document.querySelectorAll('g.edge').forEach(function (g) {\n"
	"  var t = g.querySelector('title').textContent.split('->');\n"
	"  edges.push({ g: g, a: t[0], b: t[1] });\n"
	"});\n"
	"function focus(name) {\n"
	"  focused = name && nodes[name] ? name : null;\n"
	"  var keep = {};\n"
	"  if (focused) {\n"
	"    keep[focused] = 1;\n"
	"    edges.forEach(function (e) {\n"
	"      if (e.a === focused || e.b === focused) { keep[e.a] = 1; keep[e.b] = 1; }\n"
	"    });\n"
	"  }\n"
	"  Object.keys(nodes).forEach(function (n) {\n"
	"    nodes[n].classList.toggle('dim', !!focused && !keep[n]);\n"
	"    nodes[n].classList.toggle('focus', n === focused);\n"
	"  });\n"
	"  edges.forEach(function (e) {\n"
	"    e.g.classList.toggle('dim', !!focused && e.a !== focused && e.b !== focused);\n"
	"  });\n"
	"  var h = focused ? '#focus=' + focused : '';\n"
	"  if (location.hash !== h && !(h === '' && location.hash === '#'))\n"
	"    history.replaceState(null, '', location.href.split('#')[0] + h);\n"
	"}\n"
	"document.documentElement.addEventListener('click', function (e) {\n"
	"  var g = e.target.closest && e.target.closest('g.node');\n"
	"  if (g) {\n"
	"    var n = g.querySelector('title').textContent;\n"
	"    e.preventDefault();\n"
	"    focus(n === focused ? null : n);\n"
	"  } else if (!(e.target.closest && e.target.closest('g.edge'))) focus(null);\n"
	"});\n"
	"document.addEventListener('keydown', function (e) { if (e.key === 'Escape') focus(null); });\n"
	"function load() {\n"
	"  var m = /focus=([^&]*)/.exec(location.hash);\n"
	"  focus(m ? decodeURIComponent(m[1]) : null);\n"
	"}\n"
	"window.addEventListener('hashchange', load);\n"
	"window.rbpeekCallgraph = { focus: focus };\n"
	"load();\n"
	"})();\n"
	"]]></script>\n";

int rbp_callgraph_renders(void)
{
	return 1;
}

/*
 * One Graphviz context for the process, made on first use and kept: the
 * library's own exception to "no globals".  Graphviz 2.42's pango plugin
 * keeps the last font name it measured across contexts, so laying out a
 * second graph with a fresh context read freed memory (AddressSanitizer in
 * fuzz_raw and test_formats, which render many graphs in one process).
 * Not thread-safe; the CLI renders from one thread.
 */
static GVC_t *the_gvc;

int rbp_callgraph_render(const char *dot, FILE *out)
{
	GVC_t *gvc;
	Agraph_t *g;
	char *svg = NULL, *end;
	size_t len = 0;
	unsigned int ulen = 0;
	int err = RBP_EIO;

	agseterr(AGMAX);   /* the library prints nothing: errors come back as values */
	if (!the_gvc && !(the_gvc = gvContext()))
		return RBP_ENOMEM;
	gvc = the_gvc;
	if (!(g = agmemread(dot)))
		return RBP_EINVAL;
	if (gvLayout(gvc, g, "dot") == 0) {
		if (gvRenderData(gvc, g, "svg", &svg, &ulen) == 0 && svg) {
			len = ulen;
			/* the script goes in before the closing tag */
			for (end = svg + len; end > svg && strncmp(end, "</svg>", 6); end--)
				;
			if (end > svg) {
				fwrite(svg, 1, (size_t)(end - svg), out);
				fputs(cg_script, out);
				fwrite(end, 1, len - (size_t)(end - svg), out);
				err = ferror(out) ? RBP_EIO : RBP_OK;
			}
			gvFreeRenderData(svg);
		}
		gvFreeLayout(gvc, g);
	}
	agclose(g);
	return err;
}
