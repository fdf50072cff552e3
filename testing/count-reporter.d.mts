/** The types of count-reporter.mjs (a reporter stays plain JavaScript: Node loads it before any TypeScript loader). */
export default function countReporter(
  source: AsyncIterable<{ type: string; data?: Record<string, unknown> }>,
): AsyncGenerator<string>;
