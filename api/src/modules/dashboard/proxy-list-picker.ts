// The Proxies page's Format picker and its result (docs/dashboard.md "Proxies", docs/adr/0087):
// each choice is the API's own `format` (and `scheme`, `template`), the list is drawn by the same
// function as the API's `lines`/`entries`, and Download saves it as .txt, .csv or .json. A part of
// pages/proxies.ts, kept beside it as billing-subscriptions.ts is.
import type { Product } from '#common/products.ts';
import type { ProxyScheme } from '#api/modules/proxies/format.ts';
import {
  listFile,
  MAX_TEMPLATE_LENGTH,
  type Formatted,
  type ListFormat,
} from '#api/modules/proxies/list-format.ts';
import { copyButton } from './layout.ts';
import { html, type Html } from './html.ts';

interface Choice {
  label: string;
  hint: string;
  format: ListFormat;
  scheme?: ProxyScheme;
  /** The download's file extension. */
  ext: 'txt' | 'csv' | 'json';
  /** Offered only for plans whose gateways serve TLS. */
  tlsOnly?: boolean;
}

/** The picker's choices, by the form value the Format select sends. */
const CHOICES: Readonly<Record<string, Choice>> = {
  colon: {
    label: 'host:port:user:pass',
    hint: 'host:port:username:password, one per line',
    format: 'colon',
    ext: 'txt',
  },
  http: {
    label: 'http:// URL',
    hint: 'http://username:password@host:port, one per line',
    format: 'url',
    scheme: 'http',
    ext: 'txt',
  },
  https: {
    label: 'https:// URL',
    hint: 'https://username:password@host:port (TLS to the gateway), one per line',
    format: 'url',
    scheme: 'https',
    ext: 'txt',
    tlsOnly: true,
  },
  socks5h: {
    label: 'socks5h:// URL',
    hint: 'socks5h://username:password@host:port (SOCKS5 on the same port, names resolved by the gateway), one per line',
    format: 'url',
    scheme: 'socks5h',
    ext: 'txt',
  },
  csv: {
    label: 'CSV',
    hint: 'A header line (host,port,username,password), then one row per proxy',
    format: 'csv',
    ext: 'csv',
  },
  json: { label: 'JSON', hint: 'An array of {host, port, username, password}', format: 'json', ext: 'json' },
  template: { label: 'Template', hint: 'Your template, one line per proxy', format: 'template', ext: 'txt' },
};

const choiceOf = (value: string): Choice => CHOICES[value] ?? CHOICES.colon!;

/** The generate request's format fields for the picker's value (and the template typed). */
export function formatFields(value: string, template: string): Record<string, string> {
  const c = choiceOf(value);
  return {
    format: c.format,
    ...(c.scheme ? { scheme: c.scheme } : {}),
    ...(c.format === 'template' ? { template } : {}),
  };
}

const option = (value: string, label: string, selected: string) =>
  html`<option value="${value}" ${value === selected ? html` selected` : ''}>${label}</option>`;

/** The Format select (https:// only when a plan serves TLS) and the template field. */
export function formatPicker(selected: string, template: string, tls: Product[]): Html {
  const offered = Object.entries(CHOICES).filter(([, c]) => !c.tlsOnly || tls.length);
  return html`<div>
      <label for="gen-format">Format</label>
      <select id="gen-format" name="format" aria-describedby="gen-format-hint">
        ${offered.map(([value, c]) => option(value, c.label, selected))}
      </select>
      <p class="hint" id="gen-format-hint">
        ${tls.length ? `https:// (TLS) for ${tls.join(', ')} only` : 'No plan serves https:// (TLS) yet'}
      </p>
    </div>
    <div>
      <label for="gen-template">Template</label>
      <input
        id="gen-template"
        name="template"
        class="mono"
        value="${template}"
        maxlength="${MAX_TEMPLATE_LENGTH}"
        autocomplete="off"
        aria-describedby="gen-template-hint"
      />
      <p class="hint" id="gen-template-hint">With Format Template: {host} {port} {user} {pass}</p>
    </div>`;
}

/** The generated list as the chosen format shows it, with Copy and Download. */
export function generatedList(selected: string, provider: string, formatted: Formatted): Html {
  const c = choiceOf(selected);
  const text = listFile(formatted).replace(/\r?\n$/, '');
  const rows = Math.min(10, Math.max(2, text.split('\n').length));
  return html`<label for="generated">Generated proxies</label>
    <p class="hint">${c.hint}</p>
    <textarea id="generated" rows="${rows}" readonly>${text}</textarea>
    <div class="row">
      ${copyButton('generated')}<button
        type="button"
        class="secondary"
        data-download="generated"
        data-filename="proxies-${provider}.${c.ext}"
        data-js-only
        hidden
      >
        Download .${c.ext}
      </button>
    </div>`;
}
