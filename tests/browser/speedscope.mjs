// speedscope.mjs - load rbpeek output in the real speedscope app (from
// node_modules/speedscope, served on 127.0.0.1) in Debian's headless
// Chromium (playwright-core, never a downloaded browser).
//
//   node tests/browser/speedscope.mjs [--name PREFIX] [--screenshot-dir DIR]
//        --load FILE [--profiles N] [--active NAME] [--expect NAME]... [--load FILE ...]...
//
// Each --load FILE (speedscope JSON, Chrome trace JSON, or anything else
// speedscope imports) is opened with #profileURL= and checked, printed as
// "ok PREFIX/BASENAME/check" or "FAIL PREFIX/BASENAME/check: reason":
//   load      the profile imports: the flame chart canvas appears, no error
//             message in the page, no JS exception, no console error
//   nesting   the importer logged no "Tried to end ..." / "... still open"
//             warning (trace events nest properly)
//   profiles  with --profiles N: the toolbar's profile selector says "1/N"
//             (one profile per thread) -- checked when N > 1
//   active    with --active NAME: the app opens on the profile (thread)
//             whose name contains NAME: the toolbar names it
//   expect    in the Sandwich view (a DOM table of every function) of any
//             of the profiles, a row named exactly each --expect NAME (or
//             "NAME {...}": speedscope appends trace events' args)
// With --screenshot-dir DIR, DIR/speedscope-BASENAME.png (flame chart) and
// ...-sandwich.png are written.  Exit status 1 when a check failed.
import { chromium } from 'playwright-core';
import { createServer } from 'node:http';
import { readFileSync, existsSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const appDir = join(here, 'node_modules', 'speedscope', 'dist', 'release');

function parseArgs(argv) {
	const a = { name: 'speedscope', shots: null, loads: [] };
	for (let i = 0; i < argv.length; i++) {
		const k = argv[i], v = argv[i + 1];
		if (k === '--load') { a.loads.push({ file: v, expect: [], profiles: 0, active: null }); i++; }
		else if (k === '--active' && a.loads.length) { a.loads.at(-1).active = v; i++; }
		else if (k === '--expect' && a.loads.length) { a.loads.at(-1).expect.push(v); i++; }
		else if (k === '--profiles' && a.loads.length) { a.loads.at(-1).profiles = +v; i++; }
		else if (k === '--name') { a.name = v; i++; }
		else if (k === '--screenshot-dir') { a.shots = v; i++; }
		else { a.loads = []; break; }
	}
	if (!a.loads.length) {
		console.error('usage: speedscope.mjs [--name P] [--screenshot-dir DIR] ' +
			'--load FILE [--profiles N] [--expect NAME]... [--load FILE ...]');
		process.exit(2);
	}
	return a;
}

const args = parseArgs(process.argv.slice(2));
let failed = 0;
function report(prefix, check, ok, why) {
	if (ok) console.log(`ok ${prefix}/${check}`);
	else { failed++; console.log(`FAIL ${prefix}/${check}: ${why}`); }
	return ok;
}

const types = { '.html': 'text/html', '.js': 'text/javascript', '.css': 'text/css',
	'.json': 'application/json', '.wasm': 'application/wasm', '.png': 'image/png',
	'.woff2': 'font/woff2', '.ico': 'image/x-icon', '.txt': 'text/plain' };

// /app/... is the speedscope release directory, /profile/N the N-th --load file.
function serve() {
	const server = createServer((req, res) => {
		const path = decodeURIComponent(new URL(req.url, 'http://x').pathname);
		let file = null;
		if (path.startsWith('/app/')) {
			file = resolve(appDir, '.' + path.slice(4));
			if (!file.startsWith(appDir)) file = null;
		} else if (path.startsWith('/profile/')) {
			const l = args.loads[+path.split('/')[2]];
			file = l ? resolve(l.file) : null;
		}
		if (!file || !existsSync(file)) {
			res.writeHead(404);
			res.end('not found');
			return;
		}
		res.writeHead(200, { 'Content-Type': types[extname(file)] || 'application/octet-stream',
			'Access-Control-Allow-Origin': '*' });
		res.end(readFileSync(file));
	});
	return new Promise((ok) => server.listen(0, '127.0.0.1', () => ok(server)));
}

// The names in the Sandwich view's function table (run in the page).
async function rowNames() {
	const seen = new Set();
	const scrollers = [...document.querySelectorAll('div')]
		.filter((d) => d.scrollHeight > d.clientHeight + 5 && getComputedStyle(d).overflowY !== 'visible');
	const grab = () => document.querySelectorAll('td, tr, [title]').forEach((e) => {
		for (const s of (e.innerText || '').split('\n')) seen.add(s.trim());
	});
	grab();
	for (const s of scrollers) {
		for (let y = 0; y < s.scrollHeight; y += s.clientHeight / 2) {
			s.scrollTop = y;
			await new Promise((r) => setTimeout(r, 30));
			grab();
		}
		s.scrollTop = 0;
	}
	return [...seen];
}

async function check(browser, base, index, load) {
	const prefix = `${args.name}/${basename(load.file)}`;
	const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
	const errors = [];
	page.on('pageerror', (e) => errors.push(`exception: ${e.message}`));
	const warnings = [];
	page.on('console', (m) => {
		if (m.type() === 'error') errors.push(`console: ${m.text()}`);
		// the trace importer's complaints about badly nested events
		if (m.type() === 'warning' && /Tried to end|still open/.test(m.text())) warnings.push(m.text());
	});
	try {
		// the file name in the URL tells speedscope nothing: it detects the format by content
		const url = `${base}/app/index.html#profileURL=${encodeURIComponent(`${base}/profile/${index}/${basename(load.file)}`)}`;
		await page.goto(url);
		let loaded = false;
		try {
			await page.waitForFunction(() => {
				const t = document.body.innerText;
				return /Something went wrong|Failed to|Cannot|Error/i.test(t) ||
					(document.querySelectorAll('canvas').length > 0 &&
					 /Time Order|Left Heavy|Sandwich/.test(t));
			}, null, { timeout: 30000 });
			loaded = true;
		} catch (e) {
			errors.push(`nothing loaded in 30 s: ${e.message.split('\n')[0]}`);
		}
		const text = await page.evaluate(() => document.body.innerText);
		const bad = text.match(/.*(Something went wrong|Failed to|Cannot|Error).*/i);
		if (!report(prefix, 'load', loaded && !bad && !errors.length,
			bad ? `page says "${bad[0].trim()}"` : errors.join('; ') || 'no flame chart')) {
			return;
		}
		await page.waitForTimeout(300);
		report(prefix, 'nesting', !warnings.length,
			`${warnings.length} import warnings, first: ${warnings[0]}`);
		if (args.shots)
			await page.screenshot({ path: join(args.shots, `speedscope-${basename(load.file)}.png`) });
		if (load.profiles > 1) {
			const m = text.match(/\((\d+)\/(\d+)\)/);
			report(prefix, 'profiles', m && +m[2] === load.profiles,
				m ? `the profile selector says ${m[0]}, want 1/${load.profiles}` :
					'no "(1/N)" profile selector in the toolbar');
		}
		if (load.active) {
			// the toolbar's middle: "NAME (i/N)" over the flame chart
			const m = text.match(/^.*\(\d+\/\d+\).*$/m);
			report(prefix, 'active', m && m[0].includes(load.active),
				`speedscope opened on ${m ? JSON.stringify(m[0].trim()) : 'no profile named in the toolbar'}, ` +
				`not the thread named ${JSON.stringify(load.active)}`);
		}
		if (load.expect.length) {
			await page.keyboard.press('3');   // speedscope's key for the Sandwich view
			await page.waitForTimeout(500);
			// every row of the function table of every profile ('n' shows the
			// next one); the table is virtualized, so scroll it through
			const names = new Set();
			const count = Math.max(load.profiles, 1);
			// the file opens on its busiest thread (activeProfileIndex), not
			// necessarily the first: go back to the first ('p': previous)
			for (let i = 1; i < count; i++) {
				await page.keyboard.press('p');
				await page.waitForTimeout(100);
			}
			for (let i = 0; i < count; i++) {
				if (i) {
					await page.keyboard.press('n');
					await page.waitForTimeout(300);
				}
				for (const n of await page.evaluate(rowNames))
					names.add(n);
			}
			// trace events are named "NAME {args as JSON}" by speedscope
			const has = (want) => [...names].some((n) => n === want || n.startsWith(want + ' {'));
			for (const want of load.expect)
				report(prefix, `expect ${want}`, has(want),
					`no row named ${JSON.stringify(want)} in the Sandwich tables ` +
					`(${[...names].filter((n) => n).slice(0, 8).map((n) => JSON.stringify(n)).join(', ')}...)`);
			if (args.shots)
				await page.screenshot({ path: join(args.shots,
					`speedscope-${basename(load.file)}-sandwich.png`) });
			if (errors.length)
				report(prefix, 'sandwich', false, errors.join('; '));
		}
	} finally {
		await page.close();
	}
}

const server = await serve();
const base = `http://127.0.0.1:${server.address().port}`;
const browser = await chromium.launch({
	executablePath: '/usr/bin/chromium',
	args: ['--headless', '--no-sandbox', '--disable-gpu', '--no-first-run',
		'--disable-background-networking', '--disable-component-update', '--disable-sync'],
});
try {
	for (let i = 0; i < args.loads.length; i++)
		await check(browser, base, i, args.loads[i]);
} catch (e) {
	report(args.name, 'run', false, e.message.split('\n')[0]);
} finally {
	await browser.close();
	server.close();
}
process.exit(failed ? 1 : 0);
