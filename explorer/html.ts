/**
 * HTML by tagged template: every interpolated value is escaped unless it is already `Html` (built by this template),
 * so data from the database can only ever render as text.
 */

/** Markup built by `html`; the only values inserted unescaped. */
export class Html {
  constructor(readonly text: string) {}
  toString(): string {
    return this.text;
  }
}

const ESCAPES: Record<string, string> = { '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' };

/** `value` as text safe inside an element or a quoted attribute. */
export function escapeHtml(value: string): string {
  return value.replace(/[&<>"']/g, (c) => ESCAPES[c] ?? c);
}

type Interpolated = Html | string | number | boolean | null | undefined | readonly Interpolated[];

function render(value: Interpolated): string {
  if (value === null || value === undefined || value === false) return '';
  if (value instanceof Html) return value.text;
  if (Array.isArray(value)) return value.map((item: Interpolated) => render(item)).join('');
  return escapeHtml(String(value));
}

/** The template with each value escaped (arrays joined; `null`, `undefined` and `false` render as nothing). */
export function html(strings: TemplateStringsArray, ...values: Interpolated[]): Html {
  let out = strings[0] ?? '';
  values.forEach((value, index) => {
    out += render(value) + (strings[index + 1] ?? '');
  });
  return new Html(out);
}

/** A path segment of an explorer URL (thread ids hold `/`, so it is encoded). */
export function seg(value: string | number): string {
  return encodeURIComponent(String(value));
}
