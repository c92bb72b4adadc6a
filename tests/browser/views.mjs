// views.mjs - rbpeek's views beyond the plain flame graph, opened in
// Debian's headless Chromium (playwright-core, never a downloaded browser)
// and checked the way a user reads them.
//
//   node tests/browser/views.mjs diff FILE.svg [--name P] [--red NAME --ratio R]
//        [--neutral NAME]... [--new NAME] [--gone NAME] [--screenshot FILE.png]
//
// diff (a differential flame graph, report --diff), each check printed as
// "ok P/check" or "FAIL P/check: reason":
//   load      the file opens with no JS error and no console error
//   sane      no NaN or Infinity anywhere in the page; every frame drawn lies
//             inside the image (0 <= x, x + width <= image width, the same
//             for y), and the image inside the page
//   red       the frames of --red NAME are red (rgb(255,g,b), g and b under
//             128) and their tooltips give a ratio of shares within 20 % of
//             --ratio R
//   neutral   the frames of each --neutral NAME are pale (every channel over
//             150) and change by under 3 points
//   scale     the legend shows the colour scale, from -S to +S points, with
//             S the largest change drawn
//   new       the frames of --new NAME (only in NEW) say "new: not in BASE"
//   gone      the line of functions only in BASE names --gone NAME
//
//   node tests/browser/views.mjs callgraph FILE.svg [--name P] --focus LABEL
//        --dot FILE.dot [--screenshot FILE.png]
//
// callgraph (-f callgraph, laid out by Graphviz):
//   load      opens with no JS error, one node per function of the DOT file
//   sane      as above: no NaN, every node inside the image
//   focus     clicking the node LABEL leaves exactly it and its callers and
//             callees (the DOT file's edges) undimmed, and its edges; the
//             URL says #focus=N, which reopens the same view; Esc shows all
//
//   node tests/browser/views.mjs sandwich FILE.svg [--name P] --fn LABEL --total N
//        --caller LABEL --callee LABEL [--search REGEX --search-total N]
//        [--screenshot FILE.png]
//
// sandwich (the flame graph's callers and callees view):
//   sandwich  clicking the widest frame of LABEL, then "Callers & callees",
//             shows LABEL merged over all its occurrences: its total within
//             2 % of N (the folded stacks' count, once per sample), the
//             middle box full width, --caller among the boxes below and
//             --callee among those above, each inside its parent's span
//   sw-sane   no NaN, every box inside the image
//   sw-url    the URL (#...sw=fN) reopens the same view; Esc goes back to
//             the flame graph and takes sw= out of the URL
//   sw-search with --search: the search REGEX, then "Callers & callees",
//             gives a total within 2 % of --search-total
//
//   node tests/browser/views.mjs sane FILE.svg [--name P]
//
// sane (any of the SVG views, e.g. of a big real program): it loads with no
//   JS error, no NaN or Infinity, every frame or node inside the image; for
//   a flame graph also the callers & callees view of its widest frame 3
//   levels up or more (sw-sane)
// Exit status 1 when a check failed.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

function parseArgs(argv) {
	const a = { mode: argv[0], file: argv[1], name: argv[0], neutral: [], screenshot: null };
	for (let i = 2; i < argv.length; i += 2) {
		const k = argv[i].replace(/^--/, ''), v = argv[i + 1];
		if (k === 'neutral') a.neutral.push(v);
		else a[k] = v;
	}
	if (!a.file || !['diff', 'callgraph', 'sandwich', 'sane'].includes(a.mode)) {
		console.error('usage: views.mjs diff|callgraph|sandwich|sane FILE.svg [options]');
		process.exit(2);
	}
	return a;
}

const args = parseArgs(process.argv.slice(2));
let failed = 0;
function report(check, ok, why) {
	if (ok) console.log(`ok ${args.name}/${check}${why ? `: ${why}` : ""}`);
	else { failed++; console.log(`FAIL ${args.name}/${check}: ${why}`); }
	return ok;
}

async function open(browser, url, errors, width = 1400, height = 900) {
	const page = await browser.newPage({ viewport: { width, height } });
	page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
	await page.goto(url);
	await page.waitForLoadState('load');
	return page;
}

// NaN/Infinity anywhere in the document's text or attributes, and frames
// (g.f rects, or g.node shapes) outside the image.
async function sanity(page) {
	return page.evaluate(() => {
		const probs = [];
		// numbers only: geometry attributes, and figures in the text (a
		// function may well be named NaN or Infinity)
		const bad = /\bNaN\b|\bInfinity\b/, geom = /^(x|y|x1|x2|y1|y2|cx|cy|rx|ry|r|width|height|viewBox|transform|points|d|data-[a-z]+)$/;
		const figure = /\b(NaN|Infinity)( ?%| points| samples?\b|\)|,|$)/;
		for (const e of document.querySelectorAll('*')) {
			for (const at of e.attributes) if (geom.test(at.name) && bad.test(at.value)) probs.push(`<${e.tagName} ${at.name}="${at.value.slice(0, 60)}">`);
			for (const n of e.childNodes) if (n.nodeType === 3 && figure.test(n.textContent)) probs.push(`text "${n.textContent.slice(0, 60)}"`);
		}
		const svg = document.documentElement, box = svg.getBoundingClientRect();
		let outside = 0, first = '', drawn = 0;
		for (const r of document.querySelectorAll('g.f rect, g.sf rect, g.node :is(polygon, ellipse, path)')) {
			const g = r.closest('g.f, g.sf, g.node');
			if (getComputedStyle(g).display === 'none') continue;
			const b = r.getBoundingClientRect();
			if (!b.width) continue;
			drawn++;
			if (b.left < box.left - 0.5 || b.right > box.right + 0.5 || b.top < box.top - 0.5 || b.bottom > box.bottom + 0.5) {
				if (!outside++) first = `${g.querySelector('title')?.textContent} at ${b.left.toFixed(1)},${b.top.toFixed(1)} ${b.width.toFixed(1)}x${b.height.toFixed(1)} in ${box.width.toFixed(0)}x${box.height.toFixed(0)}`;
			}
		}
		if (outside) probs.push(`${outside} of ${drawn} shapes outside the image, first ${first}`);
		if (!drawn) probs.push('nothing drawn');
		return { probs, drawn };
	});
}

function rgb(fill) {
	const m = /rgb\((\d+),(\d+),(\d+)\)/.exec(fill || '');
	return m ? [+m[1], +m[2], +m[3]] : null;
}

async function diffFrames(page) {
	return page.evaluate(() => [...document.querySelectorAll('#frames > g.f')].map((g) => {
		const t = g.querySelector('title').textContent, r = g.querySelector('rect');
		return { name: t.slice(0, t.lastIndexOf(' (')), title: t, fill: r.getAttribute('fill'),
			shown: getComputedStyle(g).display !== 'none' && +r.getAttribute('width') > 0 };
	}));
}

async function checkDiff(browser, url) {
	const errors = [];
	const page = await open(browser, url, errors);
	const fs = await diffFrames(page);
	report('load', fs.length > 0 && !errors.length, `${fs.length} frames, ${errors.join('; ') || 'no errors'}`);
	const s = await sanity(page);
	report('sane', !s.probs.length, s.probs.slice(0, 3).join('; '));
	const named = (n) => fs.filter((f) => f.shown && (f.name === n || f.name.startsWith(n + ' (')));
	const change = (f) => { const m = /: ([+-][\d.]+) points, x([\d.]+)\)$/.exec(f.title); return m ? [+m[1], +m[2]] : null; };
	if (args.red) {
		const want = +args.ratio, rs = named(args.red), probs = [];
		if (!rs.length) probs.push(`no frame ${args.red}`);
		for (const f of rs) {
			const c = rgb(f.fill), ch = change(f);
			if (!c || c[0] !== 255 || c[1] >= 128 || c[2] >= 128) probs.push(`${f.name} is ${f.fill}`);
			if (!ch || Math.abs(ch[1] - want) > 0.2 * want) probs.push(`${f.title}: ratio not ${want} within 20 %`);
		}
		report('red', !probs.length, probs.join('; '));
	}
	if (args.neutral.length) {
		const probs = [];
		for (const n of args.neutral) {
			const rs = named(n);
			if (!rs.length) probs.push(`no frame ${n}`);
			for (const f of rs) {
				const c = rgb(f.fill), ch = change(f);
				if (!c || c.some((v) => v <= 150)) probs.push(`${f.name} is ${f.fill}`);
				if (!ch || Math.abs(ch[0]) >= 3) probs.push(`${f.title}: changed by 3 points or more`);
			}
		}
		report('neutral', !probs.length, probs.join('; '));
	}
	const scale = await page.evaluate(() => {
		const l = document.getElementById('legend');
		return { s: +l.getAttribute('data-scale'), text: l.textContent,
			swatches: [...l.querySelectorAll('rect')].map((r) => r.getAttribute('fill')) };
	});
	const biggest = Math.max(...fs.filter((f) => f.shown).map((f) => Math.abs((change(f) || [0])[0])));
	const S = (100 * scale.s).toFixed(2);
	report('scale', scale.text.includes(`-${S} points`) && scale.text.includes(`+${S} points`) &&
		scale.swatches.length >= 5 && Math.abs(100 * scale.s - biggest) < 0.011,
	`legend "${scale.text}" (${scale.swatches.length} swatches), largest change drawn ${biggest}`);
	if (args.new) {
		const rs = named(args.new);
		report('new', rs.length && rs.every((f) => f.title.includes('new: not in BASE')),
			`${rs.map((f) => f.title).join('; ') || `no frame ${args.new}`}`);
	}
	if (args.gone) {
		const g = await page.evaluate(() => document.getElementById('gone')?.textContent || '');
		report('gone', g.startsWith('only in BASE') && g.includes(args.gone), `the line says "${g.slice(0, 200)}"`);
	}
	if (args.screenshot)
		await page.screenshot({ path: args.screenshot });
	await page.close();
}

// The DOT file's nodes (id -> label) and edges.
function readDot(path) {
	const text = readFileSync(path, 'utf8'), nodes = {}, edges = [];
	for (const m of text.matchAll(/^(N\d+) \[label="((?:[^"\\]|\\.)*?)\\n/gm)) nodes[m[1]] = m[2].replace(/\\(.)/g, '$1');
	for (const m of text.matchAll(/^(N\d+) -> (N\d+) /gm)) edges.push([m[1], m[2]]);
	return { nodes, edges };
}

async function checkCallgraph(browser, url) {
	const errors = [], dot = readDot(args.dot);
	const page = await open(browser, url, errors);
	const state = () => page.evaluate(() => [...document.querySelectorAll('g.node')].map((g) => ({
		id: g.querySelector('title').textContent, dim: g.classList.contains('dim'),
		focus: g.classList.contains('focus') })));
	const edgeState = () => page.evaluate(() => [...document.querySelectorAll('g.edge')].map((g) => ({
		id: g.querySelector('title').textContent, dim: g.classList.contains('dim') })));
	const ns = await state();
	report('load', ns.length === Object.keys(dot.nodes).length && !errors.length,
		`${ns.length} nodes drawn, ${Object.keys(dot.nodes).length} in the DOT file; ${errors.join('; ') || 'no errors'}`);
	const s = await sanity(page);
	report('sane', !s.probs.length, s.probs.slice(0, 3).join('; '));
	const id = Object.keys(dot.nodes).find((k) => dot.nodes[k] === args.focus);
	if (!id)
		return report('focus', false, `no node ${args.focus} in the DOT file`);
	const want = new Set([id]);
	dot.edges.forEach(([a, b]) => { if (a === id) want.add(b); if (b === id) want.add(a); });
	await page.locator(`g.node:has(> title:text-is("${id}"))`).click();
	const after = await state(), es = await edgeState();
	const probs = [];
	const lit = after.filter((n) => !n.dim).map((n) => n.id).sort();
	if (JSON.stringify(lit) !== JSON.stringify([...want].sort()))
		probs.push(`undimmed ${lit.join(',')}, want ${[...want].sort().join(',')}`);
	if (!after.find((n) => n.id === id)?.focus) probs.push(`${id} not marked focused`);
	const badEdge = es.filter((e) => { const [a, b] = e.id.split('->'); return e.dim === (a === id || b === id); });
	if (badEdge.length) probs.push(`${badEdge.length} edges dimmed wrongly, first ${badEdge[0].id}`);
	const hash = new URL(page.url()).hash;
	if (hash !== `#focus=${id}`) probs.push(`URL ${page.url()}`);
	if (args.screenshot) await page.screenshot({ path: args.screenshot });
	const again = await open(browser, page.url(), errors);
	const re = await again.evaluate(() => [...document.querySelectorAll('g.node')].filter((g) => !g.classList.contains('dim')).length);
	if (re !== want.size) probs.push(`${page.url()} reopened: ${re} nodes undimmed`);
	await again.close();
	await page.keyboard.press('Escape');
	if ((await state()).some((n) => n.dim) || new URL(page.url()).hash) probs.push('Esc did not show everything again');
	report('focus', !probs.length && !errors.length, `${args.focus} (${id}): ${probs.concat(errors).join('; ')}`);
	await page.close();
}

async function swState(page) {
	return page.evaluate(() => {
		const l = window.rbpeekSandwich.last(), W = +document.documentElement.getAttribute('width');
		const boxes = [...document.querySelectorAll('#sw g.sf')].map((g) => {
			const r = g.querySelector('rect');
			return { side: g.dataset.side, name: g.querySelector('title').textContent,
				x: +r.getAttribute('x'), w: +r.getAttribute('width') };
		});
		return { total: l ? l.total : null, W, boxes, hash: location.hash,
			framesShown: !document.getElementById('frames').classList.contains('hide'),
			head: document.getElementById('sw-head')?.textContent || '' };
	});
}

async function checkSandwich(browser, url) {
	const errors = [], probs = [];
	const page = await open(browser, url, errors);
	const id = await page.evaluate((fn) => {
		const gs = [...document.querySelectorAll('#frames > g.f')].filter((g) => {
			const t = g.querySelector('title').textContent;
			return t.startsWith(fn + ' (') && getComputedStyle(g).display !== 'none';
		});
		gs.sort((a, b) => b.dataset.w - a.dataset.w);
		return gs.length ? gs[0].id : null;
	}, args.fn);
	if (!id)
		return report('sandwich', false, `no frame ${args.fn}`);
	await page.locator(`#${id} > rect`).click();
	await page.locator('#sandwich').click();
	const st = await swState(page);
	const want = +args.total;
	if (st.total === null || Math.abs(st.total - want) > 0.02 * want)
		probs.push(`total ${st.total}, the folded stacks say ${want}`);
	const mid = st.boxes.find((b) => b.side === 'self');
	if (!mid || Math.abs(mid.w - (st.W - 20)) > 0.02) probs.push(`the middle box is ${mid && mid.w} wide in ${st.W}`);
	const has = (side, n) => st.boxes.some((b) => b.side === side && b.name.startsWith(n + ' ('));
	if (!has('caller', args.caller)) probs.push(`no caller ${args.caller}`);
	if (!has('callee', args.callee)) probs.push(`no callee ${args.callee}`);
	if (st.framesShown) probs.push('the flame graph is still shown');
	if (!st.head.includes(`${want.toLocaleString('en-US')} samples`) && st.total === want) probs.push(`header "${st.head}"`);
	report('sandwich', !probs.length && !errors.length, `${args.fn}: ${probs.concat(errors).join('; ')} (${st.head})`);
	const s = await sanity(page);
	const outside = st.boxes.filter((b) => b.x < 9.99 || b.x + b.w > st.W - 9.99);
	report('sw-sane', !s.probs.length && !outside.length, s.probs.concat(outside.slice(0, 2).map((b) => `${b.name} at ${b.x}+${b.w}`)).join('; '));
	if (args.screenshot) await page.screenshot({ path: args.screenshot });
	const p2 = [];
	if (!/sw=f\d+/.test(st.hash)) p2.push(`URL ${page.url()}`);
	const again = await open(browser, page.url(), errors);
	const st2 = await swState(again);
	if (st2.total !== st.total || st2.framesShown) p2.push(`${page.url()} reopened: total ${st2.total}`);
	await again.close();
	await page.keyboard.press('Escape');
	const st3 = await swState(page);
	if (!st3.framesShown || /sw=/.test(st3.hash)) p2.push(`after Esc: graph shown ${st3.framesShown}, URL ${st3.hash}`);
	report('sw-url', !p2.length, p2.join('; '));
	if (args.search) {
		await page.keyboard.press('Escape');   // leave the zoom
		await page.evaluate((re) => window.rbpeekFlamegraph.search(re), args.search);
		await page.locator('#sandwich').click();
		const ss = await swState(page), w2 = +args['search-total'];
		report('sw-search', ss.total !== null && Math.abs(ss.total - w2) <= 0.02 * w2,
			`/${args.search}/: total ${ss.total}, the folded stacks say ${w2}`);
	}
	await page.close();
}

async function checkSane(browser, url) {
	const errors = [];
	const page = await open(browser, url, errors);
	const s = await sanity(page);
	report('load', !errors.length, errors.join('; '));
	report('sane', !s.probs.length, `${s.drawn} shapes; ${s.probs.slice(0, 3).join('; ')}`);
	const id = await page.evaluate(() => {
		if (!window.rbpeekSandwich) return null;
		const gs = [...document.querySelectorAll('#frames > g.f')].filter((g) => +g.dataset.d >= 3 && +g.dataset.w > 0);
		gs.sort((a, b) => b.dataset.w - a.dataset.w);
		return gs.length ? gs[0].id : null;
	});
	if (id) {
		const r = await page.evaluate((i) => { const x = window.rbpeekSandwich.open(i); return x ? x.total : null; }, id);
		const s2 = await sanity(page);
		report('sw-sane', r > 0 && !s2.probs.length && !errors.length,
			`callers & callees of ${id}: total ${r}, ${s2.drawn} boxes; ${s2.probs.concat(errors).slice(0, 3).join('; ')}`);
	}
	await page.close();
}

const browser = await chromium.launch({
	executablePath: '/usr/bin/chromium',
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
		'--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
	const url = pathToFileURL(resolve(args.file)).href;
	if (args.mode === 'diff')
		await checkDiff(browser, url);
	else if (args.mode === 'callgraph')
		await checkCallgraph(browser, url);
	else if (args.mode === 'sandwich')
		await checkSandwich(browser, url);
	else
		await checkSane(browser, url);
} catch (e) {
	report('browser', false, String(e && e.stack || e).split('\n')[0]);
} finally {
	await browser.close();
}
process.exit(failed ? 1 : 0);
