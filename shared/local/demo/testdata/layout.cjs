// Measures a page in headless chromium for TestReportInBrowser: it loads
// the file at each width and prints one JSON object of facts (widths, every
// visible text's rendered font size and box, the chart's label and band
// boxes, console errors). The Go test judges them, so what fails is said
// there, beside the report's code.
//
// node layout.cjs <playwright-core dir> <chromium> <file.html> <width>...
'use strict';

const [pwDir, chromiumPath, file, ...widths] = process.argv.slice(2);
const { chromium } = require(pwDir);
const { pathToFileURL } = require('url');

// measure runs in the page: plain data only.
function measure() {
  const box = (el) => {
    const r = el.getBoundingClientRect();
    return { x: r.left + window.scrollX, y: r.top + window.scrollY, w: r.width, h: r.height };
  };
  const visible = (el) => el.checkVisibility({ checkVisibilityCSS: true, checkOpacity: true }) && el.getClientRects().length > 0;
  // A text's rendered size: its computed font size times the scale of the
  // SVG it is drawn in (a viewBox shrinks its text with it).
  const scaleOf = (el) => {
    if (!(el instanceof SVGElement)) return 1;
    const m = el.getScreenCTM();
    return m ? Math.hypot(m.a, m.b) : 1;
  };
  const texts = [];
  const walker = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    const el = n.parentElement;
    if (!n.data.trim() || !el || !visible(el)) continue;
    const size = parseFloat(getComputedStyle(el).fontSize) * scaleOf(el);
    texts.push({ tag: el.tagName.toLowerCase(), cls: el.getAttribute('class') || '', text: n.data.trim().slice(0, 80), size });
  }
  const charts = [];
  for (const svg of document.querySelectorAll('svg')) {
    if (!visible(svg)) continue;
    const pick = (sel) => [...svg.querySelectorAll(sel)].filter(visible).map((el) => ({
      cls: el.getAttribute('class') || '', text: (el.textContent || '').trim().slice(0, 80), band: el.getAttribute('data-band') || '', ...box(el),
    }));
    charts.push({
      cls: svg.getAttribute('class') || '', ...box(svg),
      texts: pick('text'), labels: pick('rect.label'), bands: pick('rect.band:not(.label)'),
    });
  }
  // Boxes of the page's own text blocks outside the chart: a table cell or
  // a paragraph that runs past the viewport is a horizontal scroll too.
  const blocks = [...document.querySelectorAll('h1,h2,p,td,th,pre,li,.log div')].filter(visible).map((el) => ({ tag: el.tagName.toLowerCase(), ...box(el) }));
  return {
    viewport: window.innerWidth,
    scrollWidth: document.documentElement.scrollWidth,
    bodyScrollWidth: document.body.scrollWidth,
    texts, charts, blocks,
  };
}

(async () => {
  const browser = await chromium.launch({
    executablePath: chromiumPath,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-gpu'],
    timeout: 120000,
  });
  const out = { widths: [] };
  try {
    for (const w of widths.map(Number)) {
      const page = await browser.newPage({ viewport: { width: w, height: 900 }, deviceScaleFactor: 1 });
      const errors = [];
      page.on('console', (m) => { if (m.type() === 'error') errors.push(m.text()); });
      page.on('pageerror', (e) => errors.push(String(e)));
      page.on('requestfailed', (r) => errors.push(`request failed: ${r.url()}`));
      // Generous: a loaded two-core machine starves the browser.
      await page.goto(pathToFileURL(file).href, { waitUntil: 'load', timeout: 120000 });
      const facts = await page.evaluate(measure);
      facts.width = w;
      facts.errors = errors;
      out.widths.push(facts);
      await page.close();
    }
  } finally {
    await browser.close();
  }
  process.stdout.write(JSON.stringify(out));
})().catch((e) => {
  process.stderr.write(String(e && e.stack || e) + '\n');
  process.exit(1);
});
