// flamegraph.mjs - drive an rbpeek flame graph SVG in Debian's headless
// Chromium (playwright-core, never a downloaded browser) the way a user does.
//
//   node tests/browser/flamegraph.mjs FILE.svg [--name PREFIX] [--expect NAME]...
//        [--zoom NAME] [--search REGEX] [--collapsed FILE.txt] [--screenshot FILE.png]
//
// Checks, each printed as "ok PREFIX/check" or "FAIL PREFIX/check: reason":
//   load      the file opens with no JS error and no console error
//   expect    a frame whose name contains each --expect NAME is drawn
//   zoom      clicking the widest frame named --zoom makes it full width,
//             hides a sibling, dims its ancestors and writes #x=ID
//   url-zoom  that URL opened in a new page shows the same zoomed view
//   unzoom    "Reset Zoom" restores the widths, the sibling and the frames
//             shown (frames of idle samples, when hidden, stay hidden)
//   search    Ctrl-F + the prompt answered with --search highlights exactly
//             the matching frames and shows "Matched: N.NN%", equal to the
//             share computed here from the frames (outermost matches only)
//             and, with --collapsed, within 0.5 points of the share of
//             folded stacks containing a match
//   url-search  #s=REGEX reproduces the search; Esc clears it
//   filter    with --filter NAME: the thread filter lists every thread; picking
//             the thread named NAME (then each other one) redraws the graph
//             from its samples alone: the root spans the width, every frame
//             sits inside its parent, frames of the other threads only are
//             hidden, the URL says #t=..., which reopens the same view, and
//             "all threads" brings back the whole graph
//   idle      with --idle NAME (a recording with idle threads, whose frames
//             include NAME): with idle samples hidden (the default) the page
//             opens with no frame NAME, and clicking "Show N idle samples"
//             adds the N samples to the root's count and the subtitle, draws
//             NAME, keeps every frame inside its parent and writes #i=1,
//             which reopens the same view; a second click brings back the
//             graph as it opened.  Written with --idle, the same the other
//             way round ("Hide N idle samples" takes them out, #i=0)
//   processes with --processes N (a --subprocesses recording): the filter
//             offers N processes, and picking one shows that process's root
//             frame alone under "all" (the others are hidden)
//             The title says the view shown: in the view without idle
//             samples "(+N idle hidden", in the one with them no "hidden"
//             and the root's count of samples; and the image stays as tall
//             as that view's stacks (no empty band over the graph)
//   open      at 1400x900 (the field test's window): the page opens on the
//             graph: no empty band between the header and the highest frame
//             (the image is as tall as the stacks shown); an image that fits
//             the window seen whole (title, highest frame, root); a taller
//             one with the deepest level holding a quarter of the samples in the
//             top 120 px of the window (or on screen, the image's bottom
//             reached first)
//   width-W   at a window W px wide (1200 and 700): the image is as wide as
//             the window (less a scrollbar), the root frame spans it less the
//             margins, a resize to the other width refits it, the legend
//             names Ruby, C, native and GC, and the deepest level holding
//             a quarter of the samples is on screen
// --screenshot X.png also writes X-zoom.png and X-search.png (zoomed, searched).
// Exit status 1 when a check failed.
import { chromium } from 'playwright-core';
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { pathToFileURL } from 'node:url';

const HL = 'rgb(230,0,230)';
let FULL = 1180;  // image width minus margins: set from the page (it fits the window)

function parseArgs(argv) {
	const a = { file: null, name: 'flamegraph', expect: [], zoom: null, search: null,
		collapsed: null, screenshot: null, filter: null, processes: null, idle: null };
	for (let i = 0; i < argv.length; i++) {
		const k = argv[i], v = argv[i + 1];
		if (k === '--expect') { a.expect.push(v); i++; }
		else if (k.startsWith('--')) { a[k.slice(2)] = v; i++; }
		else a.file = k;
	}
	if (!a.file) {
		console.error('usage: flamegraph.mjs FILE.svg [--name P] [--expect NAME]... [--zoom NAME] ' +
			'[--search REGEX] [--collapsed FILE] [--screenshot PNG]');
		process.exit(2);
	}
	return a;
}

const args = parseArgs(process.argv.slice(2));
let failed = 0;
function report(check, ok, why) {
	if (ok) console.log(`ok ${args.name}/${check}`);
	else { failed++; console.log(`FAIL ${args.name}/${check}: ${why}`); }
	return ok;
}

// Every frame as the page shows it now.
async function frames(page) {
	return page.evaluate(() => [...document.querySelectorAll('#frames > g.f')].map((g) => {
		const t = g.querySelector('title').textContent, r = g.querySelector('rect');
		const box = r.getBoundingClientRect();
		return { id: g.id, name: t.slice(0, t.lastIndexOf(' (')), title: t,
			x: +g.dataset.x, w: +g.dataset.w, d: +g.dataset.d,
			width: +r.getAttribute('width'), fill: r.getAttribute('fill'),
			shown: getComputedStyle(g).display !== 'none' && box.width > 0,
			dimmed: g.classList.contains('parent') };
	}));
}

// Share of samples (percent) under frames matching re, not counting a match
// inside a match: rebuild the tree from the frames' extents (sorted by left
// edge, parents first, a stack of the open ancestors) and add up the matches
// that have no matching ancestor.
function expectedShare(fs, re) {
	const sorted = fs.map((f) => ({ ...f, hit: f.d > 0 && re.test(f.name) }))
		.sort((a, b) => a.x - b.x || a.d - b.d);
	const stack = [];
	let open = 0, sum = 0;
	for (const f of sorted) {
		for (let t = stack.at(-1); t && !(t.d < f.d && f.x + f.w <= t.x + t.w); t = stack.at(-1))
			open -= stack.pop().hit;
		if (f.hit && !open)
			sum += f.w;
		open += f.hit;
		stack.push(f);
	}
	const total = fs.find((f) => f.d === 0).w;
	return total ? 100 * sum / total : 0;
}

function collapsedShare(path, re) {
	let all = 0, hit = 0;
	for (const line of readFileSync(path, 'utf8').split('\n')) {
		const m = /^(.*) (\d+)$/.exec(line);
		if (!m) continue;
		all += +m[2];
		if (m[1].split(';').some((fr) => re.test(fr))) hit += +m[2];
	}
	return all ? 100 * hit / all : 0;
}

async function open(browser, url, errors, width = 1200) {
	const page = await browser.newPage({ viewport: { width, height: 900 } });
	page.on('pageerror', (e) => errors.push(`page error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
	await page.goto(url);
	await page.waitForLoadState('load');
	return page;
}

async function checkZoom(browser, page, url, errors) {
	const fs = await frames(page);
	const cands = fs.filter((f) => f.d > 0 && f.name.includes(args.zoom)).sort((a, b) => b.w - a.w);
	const z = cands.find((c) => fs.some((s) => s.d === c.d && s.id !== c.id)) || cands[0];
	if (!z)
		return report('zoom', false, `no frame named ${args.zoom}`);
	const sib = fs.find((s) => s.d === z.d && s.id !== z.id);
	const before = z.width;
	await page.locator(`#${z.id} > rect`).click();
	let now = await frames(page);
	const zf = now.find((f) => f.id === z.id), sf = sib && now.find((f) => f.id === sib.id);
	const anc = now.filter((f) => f.d < z.d && f.x <= z.x && z.x + z.w <= f.x + f.w);
	const hash = new URL(page.url()).hash;
	await shot(page, '-zoom');
	report('zoom', Math.abs(zf.width - FULL) < 0.01 && (!sf || !sf.shown) &&
		anc.every((f) => f.shown && f.dimmed && Math.abs(f.width - FULL) < 0.01) &&
		hash === `#x=${z.id.slice(1)}`,
	`after clicking ${z.id} (${z.name}): width ${zf.width}, sibling shown ${sf && sf.shown}, ` +
		`ancestors ${anc.map((f) => `${f.id}:${f.width}:${f.dimmed}`).join(' ')}, hash '${hash}'`);

	const again = await open(browser, page.url(), errors);
	now = await frames(again);
	const rf = now.find((f) => f.id === z.id), rs = sib && now.find((f) => f.id === sib.id);
	report('url-zoom', Math.abs(rf.width - FULL) < 0.01 && (!rs || !rs.shown),
		`${page.url()} reopened: width ${rf.width}, sibling shown ${rs && rs.shown}`);
	await again.close();

	await page.locator('#unzoom').click();
	now = await frames(page);
	const uf = now.find((f) => f.id === z.id), us = sib && now.find((f) => f.id === sib.id);
	report('unzoom', Math.abs(uf.width - before) < 0.01 && (!us || us.shown) &&
		now.every((f, i) => f.shown === fs[i].shown && !f.dimmed) && new URL(page.url()).hash === '',
	`after Reset Zoom: width ${uf.width} (was ${before}), sibling shown ${us && us.shown}, ` +
		`url ${page.url()}`);
}

async function matchedText(page) {
	return page.locator('#matched').textContent();
}

async function checkSearch(browser, page, url, errors) {
	const re = new RegExp(args.search);
	page.once('dialog', (d) => d.accept(args.search));
	await page.keyboard.press('Control+f');
	const fs = await frames(page);
	const want = fs.filter((f) => f.d > 0 && re.test(f.name)).map((f) => f.id).sort();
	const got = fs.filter((f) => f.fill === HL).map((f) => f.id).sort();
	const text = await matchedText(page), share = expectedShare(fs, re);
	const m = /^Matched: (\d+\.\d\d)%$/.exec(text);
	let ok = want.length > 0 && JSON.stringify(want) === JSON.stringify(got) && m &&
		m[1] === share.toFixed(2);
	let why = `highlighted ${got.length} of ${want.length} matching frames, '${text}', ` +
		`expected ${share.toFixed(2)}%`;
	if (args.collapsed && m) {
		const c = collapsedShare(args.collapsed, re);
		ok = ok && Math.abs(c - +m[1]) <= 0.5;
		why += `, folded stacks say ${c.toFixed(2)}%`;
	}
	report('search', ok, why);
	await shot(page, '-search');

	const hash = new URL(page.url()).hash;
	const again = await open(browser, page.url(), errors);
	const text2 = await matchedText(again);
	const lit = (await frames(again)).filter((f) => f.fill === HL).length;
	await again.keyboard.press('Escape');
	const cleared = (await frames(again)).every((f) => f.fill !== HL) &&
		(await matchedText(again)) === '' && new URL(again.url()).hash === '';
	report('url-search', hash.startsWith('#s=') && text2 === text && lit === got.length && cleared,
		`hash '${hash}', reopened '${text2}' with ${lit} highlighted, Esc cleared: ${cleared}`);
	await again.close();
}

// A screenshot of the whole image to --screenshot (with a suffix for later states).
async function shot(page, suffix) {
	if (!args.screenshot)
		return;
	// fullPage hangs on SVG documents: size the viewport to the image instead,
	// and show the bottom (the roots) of taller ones
	const h = await page.evaluate(() => +document.documentElement.getAttribute('height'));
	await page.setViewportSize({ width: 1200, height: Math.min(Math.max(h, 100), 3000) });
	await page.evaluate(() => window.scrollTo(0, document.documentElement.scrollHeight));
	await page.screenshot({ path: args.screenshot.replace(/(\.png)?$/, `${suffix}.png`) });
	await page.setViewportSize({ width: 1200, height: 900 });
}

// Shown frames' rects and parents, to check a filtered layout.
async function layout(page) {
	return page.evaluate(() => [...document.querySelectorAll('#frames > g.f')].map((g) => {
		const r = g.querySelector('rect');
		return { id: g.id, p: g.hasAttribute('data-p') ? +g.dataset.p : -1,
			shown: getComputedStyle(g).display !== 'none' && +r.getAttribute('width') > 0,
			x: +r.getAttribute('x'), w: +r.getAttribute('width'),
			name: g.querySelector('title').textContent };
	}));
}

// What is wrong with a laid-out graph: a root narrower than the image, or a
// frame outside its parent ('' when nothing).
function badLayout(fs) {
	const root = fs.find((f) => f.p < 0);
	if (Math.abs(root.w - FULL) > 0.01)
		return `root ${root.w} wide`;
	// x and width are written rounded to 0.01 px: a child that ends where
	// its parent does may stick out by up to 0.02 px on paper
	const outside = fs.filter((f) => f.shown && f.p >= 0 && (!fs[f.p].shown ||
		f.x < fs[f.p].x - 0.025 || f.x + f.w > fs[f.p].x + fs[f.p].w + 0.025));
	if (!outside.length)
		return '';
	const f = outside[0], q = fs[f.p];
	return `${outside.length} frames outside their parent (${f.name}: ${f.x}+${f.w} in ${q.shown ? `${q.x}+${q.w}` : 'a hidden parent'})`;
}

async function checkFilter(browser, page, errors) {
	const opts = await page.evaluate(() => [...document.querySelectorAll('#thread option')]
		.map((o) => ({ v: o.value, text: o.textContent })));
	const mine = opts.find((o) => o.text.includes(`(${args.filter})`));
	if (opts.length < 3 || !mine)
		return report('filter', false, `options ${JSON.stringify(opts)}, none for thread ${args.filter}`);
	const all = await layout(page);
	const probs = [];
	for (const o of [mine, ...opts.filter((x) => x.v !== 'all' && x !== mine)]) {
		await page.selectOption('#thread', o.v);
		const fs = await layout(page);
		const bad = badLayout(fs);
		if (bad) probs.push(`${o.text}: ${bad}`);
		if (fs.filter((f) => f.shown).length >= all.filter((f) => f.shown).length)
			probs.push(`${o.text}: nothing hidden`);
		if (new URL(page.url()).hash.indexOf(`t=${o.v}`) < 0) probs.push(`${o.text}: URL ${page.url()}`);
		if (o === mine) {
			const again = await open(browser, page.url(), errors);
			const re = await layout(again);
			if (re.filter((f) => f.shown).length !== fs.filter((f) => f.shown).length)
				probs.push(`${page.url()} reopened shows another set of frames`);
			await again.close();
		}
	}
	await page.selectOption('#thread', 'all');
	const back = await layout(page);
	if (back.some((f, i) => f.shown !== all[i].shown || Math.abs(f.w - all[i].w) > 0.01)) probs.push('"all threads" does not bring back the graph');
	report('filter', probs.length === 0, probs.join('; '));
}

// The idle control: the samples of idle threads taken out of the graph and
// put back, or (written with --idle) put in and taken out.
async function checkIdle(browser, page, errors) {
	const look = async (p) => {
		const fs = await layout(p);
		const ctl = await p.evaluate(() => ({ idle: document.getElementById('idle')?.textContent ?? null,
			count: document.getElementById('count')?.textContent ?? null,
			title: document.querySelector('#title > title').textContent,
			shownTitle: document.getElementById('title').lastChild.textContent }));
		const band = await gap(p);
		const m = /^all \(([\d,]+) samples?/.exec(fs.find((f) => f.p < 0).name);
		return { fs, ...ctl, band, root: m ? +m[1].replace(/,/g, '') : NaN,
			named: fs.filter((f) => f.shown && f.name.startsWith(args.idle + ' (')).length,
			shown: fs.filter((f) => f.shown).length };
	};
	const a = await look(page);
	const m = /^(Show|Hide) ([\d,]+) idle samples? \(\d+\.\d%\)$/.exec(a.idle || '');
	if (!m)
		return report('idle', false, `idle control says ${JSON.stringify(a.idle)}, not "Show/Hide N idle samples (P%)"`);
	const hidden = m[1] === 'Show', n = +m[2].replace(/,/g, ''), probs = [];
	const [lo, hi] = hidden ? ['opened', 'shown'] : ['hidden', 'opened'];
	const check = (v, what, idle) => {   // idle: v is the view without idle samples
		const bad = badLayout(v.fs);
		if (`${v.root}` !== v.count.replace(/,/g, '')) probs.push(`${what}: root ${v.root} samples, subtitle ${v.count}`);
		if (bad) probs.push(`${what}: ${bad}`);
		if (idle ? v.named : !v.named) probs.push(`${what}: ${v.named} ${args.idle} frames shown`);
		// the title says this view: "N samples (+M idle hidden" or all samples shown
		const tm = /([\d,]+) samples( \(\+([\d,]+) idle hidden)?/.exec(v.title) || [];
		const tn = +(tm[1] || '').replace(/,/g, '');
		if (idle ? !tm[2] || tn !== v.root || +tm[3].replace(/,/g, '') !== n : tm[2] || tn !== v.root)
			probs.push(`${what}: the title says ${JSON.stringify(v.title)} (root ${v.root} samples, ${n} idle)`);
		if (!v.title.startsWith(v.shownTitle.replace(/\.\.$/, '')))
			probs.push(`${what}: the title drawn is ${JSON.stringify(v.shownTitle)}, not ${JSON.stringify(v.title)}`);
		if (v.band > FRAME_H)
			probs.push(`${what}: ${v.band.toFixed(0)} px empty between the header and the highest frame`);
	};
	await page.locator('#idle').click();
	const b = await look(page), hash = new URL(page.url()).hash;
	const [h, s] = hidden ? [a, b] : [b, a];   // idle hidden, shown
	check(h, lo, true);
	check(s, hi, false);
	if (s.root !== h.root + n) probs.push(`${hi}: root ${s.root} samples, not ${h.root} + ${n}`);
	if (s.shown <= h.shown) probs.push(`${hi}: ${s.shown} frames, ${h.shown} when ${lo}`);
	if (b.idle !== (hidden ? 'Hide' : 'Show') + a.idle.slice(4)) probs.push(`after a click the control says ${b.idle}`);
	if (hash.indexOf(`i=${hidden ? 1 : 0}`) < 0) probs.push(`after a click: URL ${page.url()}`);
	const again = await open(browser, page.url(), errors);
	const c = await look(again);
	if (c.root !== b.root || c.shown !== b.shown) probs.push(`${page.url()} reopened: root ${c.root}, ${c.shown} frames`);
	await again.close();
	await page.locator('#idle').click();
	const d = await look(page);
	if (d.root !== a.root || d.named !== a.named || d.idle !== a.idle || new URL(page.url()).hash.indexOf('i=') >= 0 ||
	    d.fs.some((f, i) => f.shown !== a.fs[i].shown || Math.abs(f.w - a.fs[i].w) > 0.01 || f.name !== a.fs[i].name))
		probs.push(`clicked twice: root ${d.root}, ${d.named} ${args.idle} frames, control ${d.idle}, url ${page.url()}, ` +
			'not the graph as opened');
	report('idle', probs.length === 0, `${n} idle samples: ${probs.join('; ')}`);
}

// The filter's process choices: one per process, each showing its own
// "process PID: ..." root frame alone.
async function checkProcesses(page) {
	const opts = await page.evaluate(() => [...document.querySelectorAll('#thread option')]
		.map((o) => ({ v: o.value, text: o.textContent })).filter((o) => o.v[0] === 'p'));
	const probs = [];
	if (opts.length !== +args.processes)
		probs.push(`${opts.length} process choices (${opts.map((o) => o.text).join(', ')}), expected ${args.processes}`);
	for (const o of opts) {
		await page.selectOption('#thread', o.v);
		const roots = (await frames(page)).filter((f) => f.d === 1 && f.shown).map((f) => f.name);
		if (roots.length !== 1 || !roots[0].startsWith(`process ${o.v.slice(1)}:`))
			probs.push(`${o.text}: process roots shown ${JSON.stringify(roots)}`);
	}
	await page.selectOption('#thread', 'all');
	report('processes', probs.length === 0, probs.join('; '));
}

const HEADER = 80, FRAME_H = 16;   // the header's height and one stack level, px (flamegraph.c)

// Pixels of empty image between the header and the top of the highest frame shown.
async function gap(page) {
	return page.evaluate((hd) => {
		const svgTop = document.documentElement.getBoundingClientRect().top;
		let top = Infinity;
		for (const g of document.querySelectorAll('#frames > g.f')) {
			const r = g.querySelector('rect').getBoundingClientRect();
			if (getComputedStyle(g).display !== 'none' && r.width > 0) top = Math.min(top, r.top - svgTop);
		}
		return top - hd;
	}, HEADER);
}

// The page as it opens in the field test's window (1400x900): on the graph,
// title and top of the stacks on screen, no empty band over them, the root
// on screen too when the image fits.
async function checkOpen(browser, url, errors) {
	const page = await open(browser, url, errors, 1400);
	const v = await page.evaluate(() => {
		const t = document.getElementById('title').getBoundingClientRect();
		const root = document.querySelector('#frames > g.f[data-d="0"] > rect').getBoundingClientRect();
		let top = null;
		for (const g of document.querySelectorAll('#frames > g.f')) {
			const r = g.querySelector('rect').getBoundingClientRect();
			if (getComputedStyle(g).display !== 'none' && r.width > 0 && (!top || r.top < top.top)) top = r;
		}
		// the deepest level holding a quarter of the samples, and its place
		const sum = [], place = [];
		let total = 0;
		for (const g of document.querySelectorAll('#frames > g.f')) {
			const r = g.querySelector('rect').getBoundingClientRect(), d = +g.dataset.d;
			if (getComputedStyle(g).display === 'none' || !r.width) continue;
			sum[d] = (sum[d] || 0) + +g.dataset.w;
			place[d] = [r.top, r.bottom];
			if (d === 0) total = +g.dataset.w;
		}
		let deep = 0;
		sum.forEach((v, i) => { if (v >= 0.25 * total) deep = i; });
		return { title: [t.top, t.bottom], top: [top.top, top.bottom], root: [root.top, root.bottom],
			deep, level: place[deep], vh: window.innerHeight,
			h: +document.documentElement.getAttribute('height'), y: window.scrollY };
	});
	const band = await gap(page);
	const on = (r) => r[0] >= 0 && r[1] <= v.vh + 1;
	const probs = [];
	if (band > FRAME_H) probs.push(`${band.toFixed(0)} px empty between the header and the highest frame`);
	if (v.h <= v.vh) {
		if (!on(v.title)) probs.push(`the title at ${v.title[0].toFixed(0)}..${v.title[1].toFixed(0)}`);
		if (!on(v.top)) probs.push(`the highest frame at ${v.top[0].toFixed(0)}..${v.top[1].toFixed(0)}`);
		if (!on(v.root)) probs.push(`the root at ${v.root[0].toFixed(0)}..${v.root[1].toFixed(0)}`);
	} else if (!on(v.level) || (v.level[1] > 120 + FRAME_H && v.y + v.vh < v.h - 1))
		// near the top of the window, unless the image ends first (then the root shows)
		probs.push(`level ${v.deep} (the deepest with a quarter of the samples) at ${v.level[0].toFixed(0)}..${v.level[1].toFixed(0)}`);
	else if (v.y + v.vh > v.h + 1)
		probs.push('scrolled past the bottom');
	report('open', probs.length === 0, `image ${v.h} px tall, scrolled to ${v.y} in a ${v.vh} px window: ${probs.join('; ')}`);
	await page.close();
}

// The image fits a window `width` px wide, refits on resize, has a legend,
// and opens with the deepest level holding a quarter of the samples on screen.
async function checkWidth(browser, url, errors, width) {
	const page = await open(browser, url, errors, width);
	const look = () => page.evaluate(() => {
		const svg = document.documentElement, root = document.querySelector('#frames > g.f[data-d="0"] > rect');
		// the deepest level holding a quarter of the samples
		const sum = [], place = [];
		for (const g of document.querySelectorAll('#frames > g.f')) {
			const r = g.querySelector('rect').getBoundingClientRect(), d = +g.dataset.d;
			if (getComputedStyle(g).display === 'none' || !r.width) continue;
			sum[d] = (sum[d] || 0) + +g.dataset.w;
			place[d] = r;
		}
		let deep = 0;
		sum.forEach((v, i) => { if (v >= 0.25 * sum[0]) deep = i; });
		const box = place[deep];
		return { svg: +svg.getAttribute('width'), inner: window.innerWidth, client: svg.clientWidth,
			root: +root.getAttribute('width'), top: box.top, bottom: box.bottom, vh: window.innerHeight,
			legend: [...document.querySelectorAll('#legend text')].map((t) => t.textContent) };
	});
	const a = await look();
	const other = width === 1200 ? 700 : 1200;
	await page.setViewportSize({ width: other, height: 900 });
	await page.waitForFunction((w) => Math.abs(+document.documentElement.getAttribute('width') - w) <= 20, other);
	const b = await look();
	const fits = (v, w) => v.svg <= w && v.svg >= w - 20 && Math.abs(v.root - (v.svg - 20)) < 0.01;
	const legend = ['Ruby', 'C method', 'native', 'GC'].every((k) => a.legend.some((t) => t.startsWith(k)));
	const onScreen = a.top >= 0 && a.bottom <= a.vh + 1;
	report(`width-${width}`, fits(a, width) && fits(b, other) && legend && onScreen,
		`window ${width}: image ${a.svg} px, root ${a.root}; resized to ${other}: image ${b.svg}, root ${b.root}; ` +
		`legend ${JSON.stringify(a.legend)}; the deepest level with a quarter of the samples at ${a.top.toFixed(0)}..${a.bottom.toFixed(0)} of ${a.vh}`);
	await page.close();
}

async function main() {
	const url = pathToFileURL(resolve(args.file)).href;
	const browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync'],
	});
	const errors = [];
	try {
		const page = await open(browser, url, errors);
		FULL = await page.evaluate(() => +document.documentElement.getAttribute('width')) - 20;
		const fs = await frames(page);
		report('load', fs.length > 0 && errors.length === 0,
			`${fs.length} frames, ${errors.join('; ') || 'no errors'}`);
		const missing = args.expect.filter((n) => !fs.some((f) => f.name.includes(n)));
		if (args.expect.length)
			report('expect', missing.length === 0, `no frame named ${missing.join(', ')}`);
		await shot(page, '');
		if (args.zoom)
			await checkZoom(browser, page, url, errors);
		if (args.search)
			await checkSearch(browser, page, url, errors);
		if (args.filter)
			await checkFilter(browser, page, errors);
		if (args.processes)
			await checkProcesses(page);
		if (args.idle)
			await checkIdle(browser, page, errors);
		await checkOpen(browser, url, errors);
		for (const w of [1200, 700])
			await checkWidth(browser, url, errors, w);
		report('errors', errors.length === 0, errors.join('; '));
	} finally {
		await browser.close();
	}
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
	console.log(`FAIL ${args.name}/browser: ${String(e && e.stack || e).split('\n')[0]}`);
	process.exit(1);
});
