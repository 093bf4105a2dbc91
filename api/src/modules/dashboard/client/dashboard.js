// The dashboard's progressive enhancements: copy, reveal, download, confirmation dialogs and the
// usage chart. Every page works without this file; it only makes the pages nicer.
const live = document.getElementById('live-status');
const say = (text) => {
  if (live) live.textContent = text;
};

for (const el of document.querySelectorAll('[data-js-only]')) el.hidden = false;

document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('button') : null;
  if (!button) return;
  if (button.dataset.copy) {
    const field = document.getElementById(button.dataset.copy);
    if (!field) return;
    try {
      await navigator.clipboard.writeText(field.value);
    } catch {
      field.select();
      document.execCommand('copy');
    }
    say('Copied to the clipboard.');
  } else if (button.dataset.reveal) {
    const field = document.getElementById(button.dataset.reveal);
    if (!field) return;
    const show = field.type === 'password';
    field.type = show ? 'text' : 'password';
    button.setAttribute('aria-pressed', String(show));
    button.textContent = show ? 'Hide' : 'Reveal';
  } else if (button.dataset.download) {
    const field = document.getElementById(button.dataset.download);
    if (!field) return;
    const name = button.dataset.filename || 'proxies.txt';
    // A textarea's value has LF line breaks; CSV files take CRLF (RFC 4180).
    const csv = name.endsWith('.csv');
    const text = csv ? field.value.replace(/\n/g, '\r\n') + '\r\n' : field.value + '\n';
    const type = csv ? 'text/csv' : name.endsWith('.json') ? 'application/json' : 'text/plain';
    const url = URL.createObjectURL(new Blob([text], { type }));
    const a = document.createElement('a');
    a.href = url;
    a.download = name;
    document.body.append(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(url), 10_000);
  } else if (button.dataset.close) {
    button.closest('dialog')?.close();
  }
});

// A form with data-confirm opens its confirmation dialog instead of the confirmation page.
document.addEventListener('submit', (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
  const dialog = document.getElementById(form.dataset.confirm);
  if (!(dialog instanceof HTMLDialogElement)) return;
  event.preventDefault();
  dialog.showModal();
});

const chart = document.getElementById('usage-chart');
const data = document.getElementById('usage-data');
if (chart && data) {
  const { default: uPlot } = await import('__UPLOT_URL__');
  const usage = JSON.parse(data.textContent);
  const colors = ['#1d4ed8', '#b45309', '#047857', '#9d174d', '#4338ca'];
  const series = [
    { label: usage.times ? 'Time' : 'Day' },
    ...(usage.labels ?? usage.products).map((p, i) => ({
      label: p,
      stroke: colors[i % colors.length],
      width: 2,
    })),
  ];
  // The Usage page gives its buckets' times (seconds); the Overview, its days.
  const xs = usage.times ?? usage.days.map((d) => Date.parse(`${d}T00:00:00Z`) / 1000);
  const width = () => Math.max(280, Math.min(chart.clientWidth || 600, 900));
  const plot = new uPlot(
    {
      width: width(),
      height: 260,
      series,
      axes: [{}, { label: usage.unit ?? 'MB', size: 60 }],
      scales: { x: { time: true } },
    },
    [xs, ...usage.series],
    chart,
  );
  const canvas = chart.querySelector('canvas');
  if (canvas) {
    canvas.setAttribute('role', 'img');
    canvas.setAttribute('aria-label', chart.dataset.label || 'Daily usage by product');
  }
  window.addEventListener('resize', () => plot.setSize({ width: width(), height: 260 }));
}
