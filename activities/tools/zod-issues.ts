import type { z } from 'zod';

/** zod's issues as one clause each, joined; `noun` names what an unknown key is (an argument, a field). */
export function describeIssues(issues: readonly z.core.$ZodIssue[], noun = 'argument'): string {
  return issues
    .map((issue) => {
      if (issue.code === 'unrecognized_keys') {
        return `unknown ${noun}${issue.keys.length > 1 ? 's' : ''} ${issue.keys.map((k) => `'${k}'`).join(', ')}`;
      }
      const where = issue.path.length > 0 ? `'${issue.path.join('.')}' ` : '';
      return `${where}${issue.message}`;
    })
    .join('; ');
}
