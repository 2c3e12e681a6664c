// Copy buttons of the settings page (same-origin file: the CSP allows no inline script).
// Buttons are rendered hidden and shown here, so without script there is no dead button.
'use strict';
document.addEventListener('DOMContentLoaded', () => {
  for (const button of document.querySelectorAll('button[data-copy]')) button.hidden = false;
});
document.addEventListener('click', async (event) => {
  const button = event.target instanceof Element ? event.target.closest('button[data-copy]') : null;
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source) return;
  const text = 'value' in source ? source.value : source.textContent;
  const status = document.querySelector('.copy-status');
  let copied = false;
  try {
    await navigator.clipboard.writeText(text);
    copied = true;
  } catch {
    // No clipboard permission (plain http, some browsers): select the text and try the old way.
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    if (typeof source.select === 'function') source.select();
    copied = document.execCommand('copy');
  }
  if (status) status.textContent = copied ? 'Copied to the clipboard.' : 'Selected: press Ctrl+C (or ⌘C) to copy.';
});
