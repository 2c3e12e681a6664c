import { escapeHtml, html } from '../gateway/settings/html.js';

// The one escaping helper every settings page is built with.

describe('html``', () => {
  it('escapes every interpolated string, including attribute quotes', () => {
    const evil = `"><script>alert('x')</script>&`;
    expect(html`<input value="${evil}">`.value).toBe(
      '<input value="&quot;&gt;&lt;script&gt;alert(&#39;x&#39;)&lt;/script&gt;&amp;">',
    );
    expect(escapeHtml('`')).toBe('&#96;');
  });

  it('keeps nested fragments and arrays of fragments as markup, and drops null, undefined and false', () => {
    const items = ['<a>', 'b'].map((x) => html`<li>${x}</li>`);
    expect(html`<ul>${items}</ul>${null}${undefined}${false}${0}`.value).toBe('<ul><li>&lt;a&gt;</li><li>b</li></ul>0');
  });

  it('treats a string that looks like markup as text', () => {
    expect(html`${'<b>bold</b>'}`.value).toBe('&lt;b&gt;bold&lt;/b&gt;');
  });
});
