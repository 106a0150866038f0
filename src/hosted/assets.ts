// The dashboard's only static files: a stylesheet and the optional countdown script (the page
// works without it: the expiry time is printed as text).
export const STYLE_CSS = `
body { font: 15px/1.45 system-ui, sans-serif; margin: 0; color: #1b1f24; background: #f6f7f9; }
header { display: flex; justify-content: space-between; align-items: center; padding: 10px 24px; background: #1b1f24; color: #fff; }
header a.brand { color: #fff; font-weight: 600; text-decoration: none; }
header .signout span { margin-right: 10px; opacity: .8; }
main { max-width: 880px; margin: 0 auto; padding: 16px 24px 48px; }
section { background: #fff; border: 1px solid #dde1e6; border-radius: 8px; padding: 12px 18px; margin: 16px 0; }
p.target { font-size: 17px; }
strong.host { font-family: ui-monospace, monospace; background: #fff4d6; padding: 1px 6px; border-radius: 4px; }
.badge { display: inline-block; font-size: 12px; padding: 0 6px; border-radius: 8px; background: #fde2e1; color: #8a1c1c; border: 1px solid #e9a9a7; }
table { border-collapse: collapse; width: 100%; }
th, td { text-align: left; padding: 6px 8px; border-bottom: 1px solid #eceff2; vertical-align: middle; }
button { font: inherit; padding: 5px 12px; border-radius: 6px; border: 1px solid #8a939c; background: #fff; cursor: pointer; }
button.primary { background: #1f6feb; border-color: #1f6feb; color: #fff; }
input[type=email], input[type=text] { font: inherit; padding: 5px 8px; border: 1px solid #8a939c; border-radius: 6px; }
.online { color: #1a7f37; font-weight: 600; } .offline { color: #8a939c; } .unknown { color: #8a939c; font-style: italic; }
.secret { font-family: ui-monospace, monospace; background: #fff8c5; padding: 6px 10px; border-radius: 6px; word-break: break-all; }
.code { font-family: ui-monospace, monospace; font-size: 1.2em; letter-spacing: .05em; }
.qr { width: 240px; height: 240px; image-rendering: pixelated; }
.error { color: #cf222e; } .muted { color: #57606a; }
pre.payload { white-space: pre-wrap; word-break: break-all; background: #f0f2f4; padding: 8px; border-radius: 6px; }
form.inline { display: inline; } fieldset { border: 0; padding: 0; margin: 8px 0; }
`;

export const COUNTDOWN_JS = `
for (const el of document.querySelectorAll('[data-expires]')) {
  const until = Date.parse(el.getAttribute('data-expires'));
  const tick = () => {
    const s = Math.max(0, Math.round((until - Date.now()) / 1000));
    el.textContent = s > 0 ? Math.floor(s / 60) + ':' + String(s % 60).padStart(2, '0') + ' left' : 'expired';
    if (s > 0) setTimeout(tick, 1000);
  };
  tick();
}
`;

/**
 * The pairing page's watcher: polls the account's phones and says when a new one has paired
 * (the page works without it: "Show my phones" reloads the dashboard).
 */
export const PAIRING_JS = `
const box = document.querySelector('[data-known-devices]');
if (box) {
  const known = new Set(JSON.parse(box.getAttribute('data-known-devices')));
  const poll = async () => {
    try {
      const r = await fetch('/account/phones.json', { credentials: 'same-origin', cache: 'no-store' });
      if (r.ok) {
        const phones = await r.json();
        const fresh = phones.find((p) => !known.has(p.id));
        if (fresh) {
          box.textContent = 'Paired: ' + fresh.name + (fresh.online === true ? ' (online)' : '') + '. ';
          const a = document.createElement('a');
          a.href = '/account';
          a.textContent = 'Back to your phones';
          box.appendChild(a);
          box.setAttribute('data-paired', fresh.id);
          return;
        }
      }
    } catch {}
    setTimeout(poll, 1500);
  };
  setTimeout(poll, 1500);
}
for (const b of document.querySelectorAll('[data-copy]')) {
  b.addEventListener('click', async () => {
    const text = document.getElementById(b.getAttribute('data-copy')).textContent;
    try { await navigator.clipboard.writeText(text); b.textContent = 'Copied'; } catch { b.textContent = 'Select and copy'; }
  });
}
`;

/** A small icon, so browsers' favicon requests are not 404s. */
export const FAVICON_SVG =
  '<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 16 16"><rect x="4" y="1" width="8" height="14" rx="2" fill="#1b1f24"/><rect x="5" y="3" width="6" height="9" fill="#fff"/></svg>';
