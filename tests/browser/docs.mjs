// docs.mjs - open every page of a built documentation site (make docs) from
// file:// in Debian's headless Chromium (playwright-core, never a downloaded
// browser) and check its links and assets the way a reader's browser sees
// them.
//
//   node tests/browser/docs.mjs SITE_DIR [--name PREFIX]
//
// Checks, each printed as "ok PREFIX/check" or "FAIL PREFIX/check: reason":
//   pages       the site has HTML pages (404.html is left out: it is for web
//               servers, and its links are rooted at the server's /)
//   load/PAGE   the page opens with no JS error, no console error and no
//               failed request (a missing script, style sheet or font)
//   assets/PAGE every script, style sheet, image, font and frame the page
//               loads is a file of the site (or a data: URL): nothing from
//               another host, nothing outside SITE_DIR.  Requests to other
//               hosts are aborted, so the test never touches the network.
//   links/PAGE  every link to a file:// URL (relative links resolve to it)
//               points into SITE_DIR at an existing file, and its #anchor,
//               if any, is the id (or name) of an element of that page
//   reached     every page is reached by links from index.html
//   menu        on index.html, clicking each drop-down of the navigation bar
//               shows its menu (the theme's scripts work from file://)
// Exit status 1 when a check failed.
import { chromium } from 'playwright-core';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { join, relative, resolve, sep } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const args = { dir: null, name: 'docs' };
for (let i = 2; i < process.argv.length; i++) {
	if (process.argv[i] === '--name') args.name = process.argv[++i];
	else args.dir = process.argv[i];
}
if (!args.dir) {
	console.error('usage: docs.mjs SITE_DIR [--name PREFIX]');
	process.exit(2);
}
const root = resolve(args.dir);
let failed = 0;
function report(check, ok, why) {
	if (ok) console.log(`ok ${args.name}/${check}`);
	else { failed++; console.log(`FAIL ${args.name}/${check}: ${why}`); }
	return ok;
}

function htmlFiles(dir) {
	const out = [];
	for (const e of readdirSync(dir)) {
		const p = join(dir, e);
		if (statSync(p).isDirectory()) out.push(...htmlFiles(p));
		else if (e.endsWith('.html')) out.push(p);
	}
	return out.sort();
}

const inside = (p) => p === root || p.startsWith(root + sep);
const rel = (p) => relative(root, p) || '.';

// One page: what it loaded, what failed, its anchors and its links.
async function visit(browser, file) {
	const page = await browser.newPage();
	const errors = [], loaded = [], foreign = [];
	page.on('pageerror', (e) => errors.push(`JS error: ${e.message}`));
	page.on('console', (m) => { if (m.type() === 'error') errors.push(`console: ${m.text()}`); });
	page.on('requestfailed', (r) => {
		if (!foreign.includes(r.url()))
			errors.push(`request failed: ${r.url()} (${r.failure()?.errorText})`);
	});
	await page.route('**/*', (route) => {
		const u = route.request().url();
		if (u.startsWith('file:') || u.startsWith('data:')) {
			loaded.push(u);
			return route.continue();
		}
		foreign.push(u);
		return route.abort();
	});
	await page.goto(pathToFileURL(file).href, { waitUntil: 'load' });
	// Asset references in the document itself, loaded or not (a lazy image,
	// a stylesheet for print), and every link.
	const info = await page.evaluate(() => {
		const attr = (sel, a) => [...document.querySelectorAll(sel)].map((e) => e[a]).filter(Boolean);
		return {
			assets: [...attr('script[src]', 'src'), ...attr('img[src]', 'src'),
				...attr('iframe[src]', 'src'), ...attr('source[src]', 'src'),
				...attr('link[href]:not([rel~="canonical"]):not([rel~="alternate"])', 'href')],
			links: [...document.querySelectorAll('a[href]')].map((a) => ({
				href: a.href, raw: a.getAttribute('href') })),
			ids: [...document.querySelectorAll('[id]')].map((e) => e.id)
				.concat([...document.querySelectorAll('a[name]')].map((e) => e.name)),
		};
	});
	await page.close();
	return { errors, loaded, foreign, ...info };
}

// Each drop-down toggle of the navigation bar opens a visible menu of links.
async function checkMenus(browser) {
	const page = await browser.newPage();
	const bad = [];
	let n = 0;
	try {
		await page.goto(pathToFileURL(join(root, 'index.html')).href, { waitUntil: 'load' });
		const toggles = page.locator('.navbar .dropdown-toggle');
		n = await toggles.count();
		for (let i = 0; i < n; i++) {
			const t = toggles.nth(i), label = (await t.innerText()).trim();
			await t.click();
			const shown = await t.evaluate((el) => {
				const m = el.parentElement.querySelector('.dropdown-menu');
				return !!m && getComputedStyle(m).display !== 'none' && m.querySelectorAll('a[href]').length > 0;
			});
			if (!shown) bad.push(label);
			await page.keyboard.press('Escape');
		}
	} finally {
		await page.close();
	}
	report('menu', n > 0 && bad.length === 0,
		n ? `drop-downs that do not open: ${bad.join(', ')}` : 'no drop-down in the navigation bar');
	return n;
}

async function main() {
	const pages = existsSync(root) ? htmlFiles(root).filter((p) => rel(p) !== '404.html') : [];
	if (!report('pages', pages.length > 0, `no HTML pages under ${root}`))
		return;
	const browser = await chromium.launch({
		executablePath: '/usr/bin/chromium',
		args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
			'--disable-background-networking', '--disable-component-update', '--disable-sync'],
	});
	const seen = new Map();   // path -> visit result
	try {
		for (const p of pages)
			seen.set(p, await visit(browser, p));
		await checkMenus(browser);
	} finally {
		await browser.close();
	}
	const edges = new Map();   // path -> linked paths (for "reached")
	for (const [p, v] of seen) {
		const name = rel(p);
		report(`load/${name}`, v.errors.length === 0, v.errors.slice(0, 3).join('; '));
		const bad = [...new Set([...v.foreign, ...v.assets.filter((u) => !u.startsWith('file:') &&
			!u.startsWith('data:')), ...v.loaded.filter((u) => u.startsWith('file:') &&
			!inside(fileURLToPath(u.split(/[?#]/)[0])))])];
		report(`assets/${name}`, bad.length === 0, `loads from outside the site: ${bad.slice(0, 3).join(', ')}`);
		const broken = [];
		edges.set(p, []);
		for (const l of v.links) {
			if (!l.href.startsWith('file:'))
				continue;   // http(s), mailto: links to the world are fine
			const [path, hash] = l.href.split('#');
			const target = fileURLToPath(path.split('?')[0]);
			if (!inside(target)) { broken.push(`${l.raw} (outside the site)`); continue; }
			if (!existsSync(target)) { broken.push(`${l.raw} (no such file)`); continue; }
			if (statSync(target).isDirectory()) { broken.push(`${l.raw} (a directory: no index page from file://)`); continue; }
			edges.get(p).push(target);
			if (hash === undefined || hash === '')
				continue;
			const tv = seen.get(target);
			if (!tv) { broken.push(`${l.raw} (an anchor into a page that is not HTML)`); continue; }
			if (!tv.ids.includes(decodeURIComponent(hash)))
				broken.push(`${l.raw} (no #${hash} in ${rel(target)})`);
		}
		report(`links/${name}`, broken.length === 0, `${broken.length} broken: ${broken.slice(0, 5).join(', ')}`);
	}
	// Every page reachable from the home page.
	const start = join(root, 'index.html'), reached = new Set([start]), todo = [start];
	while (todo.length)
		for (const t of edges.get(todo.pop()) || [])
			if (!reached.has(t)) { reached.add(t); todo.push(t); }
	const lost = pages.filter((p) => !reached.has(p)).map(rel);
	report('reached', seen.has(start) && lost.length === 0,
		seen.has(start) ? `not linked from the site: ${lost.join(', ')}` : 'no index.html');
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
	console.log(`FAIL ${args.name}/browser: ${String(e && e.stack || e).split('\n')[0]}`);
	process.exit(1);
});
