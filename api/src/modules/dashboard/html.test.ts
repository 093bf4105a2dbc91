import { describe, expect, it } from '@jest/globals';
import { html, jsonBlock, raw } from './html.ts';

describe('html tagged template', () => {
  it('escapes interpolated text, attributes included', () => {
    const name = `<script>alert("x")</script>&'`;
    expect(html`<p title="${name}">${name}</p>`.text).toBe(
      '<p title="&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;">&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt;&amp;&#39;</p>',
    );
  });
  it('nests templates and arrays without escaping them twice, and drops null, undefined and false', () => {
    const items = ['a<b', 'c'].map((i) => html`<li>${i}</li>`);
    // prettier-ignore
    const list = html`<ul>${items}${null}${undefined}${false}${0}</ul>`;
    expect(list.text).toBe('<ul><li>a&lt;b</li><li>c</li>0</ul>');
    expect(html`${raw('<br>')}`.text).toBe('<br>');
  });
  it('makes JSON that cannot end its script element', () => {
    expect(jsonBlock({ s: '</script><!--&' }).text).toBe('{"s":"\\u003c/script\\u003e\\u003c!--\\u0026"}');
  });
});
