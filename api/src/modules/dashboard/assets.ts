// Static assets of the dashboard, served by the API process itself (no third-party origin): uPlot
// from npm and our own small ES module and stylesheet. Names carry a content hash, so responses
// are cacheable forever and a new release never meets a stale file.
import { createHash } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { RequestHandler } from 'express';

export interface Asset {
  url: string;
  type: string;
  body: Buffer;
}

export interface Assets {
  script: string;
  style: string;
  uplotStyle: string;
  handler: RequestHandler;
}

const ONE_YEAR_SECONDS = 365 * 24 * 3600;
const CLIENT_DIR = fileURLToPath(new URL('./client/', import.meta.url));

function fingerprint(name: string, body: Buffer, type: string): Asset {
  const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
  const ext = path.extname(name);
  return { url: `/assets/${path.basename(name, ext)}.${hash}${ext}`, type, body };
}

export function loadAssets(): Assets {
  const require = createRequire(import.meta.url);
  const uplotDir = path.dirname(require.resolve('uplot/package.json'));
  const uplot = fingerprint(
    'uplot.js',
    readFileSync(path.join(uplotDir, 'dist/uPlot.esm.js')),
    'text/javascript; charset=utf-8',
  );
  const uplotCss = fingerprint(
    'uplot.css',
    readFileSync(path.join(uplotDir, 'dist/uPlot.min.css')),
    'text/css; charset=utf-8',
  );
  const scriptText = readFileSync(path.join(CLIENT_DIR, 'dashboard.js'), 'utf8').replace(
    '__UPLOT_URL__',
    uplot.url,
  );
  const script = fingerprint('dashboard.js', Buffer.from(scriptText), 'text/javascript; charset=utf-8');
  const style = fingerprint(
    'dashboard.css',
    readFileSync(path.join(CLIENT_DIR, 'dashboard.css')),
    'text/css; charset=utf-8',
  );
  const byUrl = new Map([uplot, uplotCss, script, style].map((a) => [a.url, a]));
  return {
    script: script.url,
    style: style.url,
    uplotStyle: uplotCss.url,
    handler: (req, res, next) => {
      const asset = byUrl.get(req.path);
      if (!asset || (req.method !== 'GET' && req.method !== 'HEAD')) return next();
      res.set({
        'Content-Type': asset.type,
        'Cache-Control': `public, max-age=${ONE_YEAR_SECONDS}, immutable`,
      });
      res.end(req.method === 'HEAD' ? undefined : asset.body);
    },
  };
}
