/**
 * Rules of shared environment data, shared by the tools the model calls and the direct store API: what a key may
 * look like, how long a description may be, how large a value may get. Pure code.
 */

/** Keys: letters, digits and `_ - . /`; `/` namespaces them (`arc/task`), so it cannot lead, trail or repeat. */
export const ENV_KEY_PATTERN = /^[A-Za-z0-9_.-]+(\/[A-Za-z0-9_.-]+)*$/;
export const MAX_ENV_KEY_LENGTH = 200;
export const MAX_ENV_DESCRIPTION_LENGTH = 500;
/** Largest value, as JSON text. */
export const DEFAULT_MAX_ENV_VALUE_BYTES = 100 * 1024;
/** Channel every env-data change is announced on (`LISTEN baton_env_events`). */
export const ENV_EVENTS_CHANNEL = 'baton_env_events';

/** Why `key` is not a valid key, or `undefined`. */
export function envKeyProblem(key: string): string | undefined {
  if (key.length === 0) return 'the key must not be empty';
  if (key.length > MAX_ENV_KEY_LENGTH) return `the key is longer than ${MAX_ENV_KEY_LENGTH} characters`;
  if (!ENV_KEY_PATTERN.test(key)) {
    return `the key '${key}' may hold only letters, digits and _ - . / (a '/' separates namespaces: no leading, trailing or double '/')`;
  }
  return undefined;
}

/** Why `description` is not a valid short description, or `undefined`. */
export function envDescriptionProblem(description: string): string | undefined {
  if (typeof description !== 'string') {
    return 'short_description is required: one or two sentences saying what the value holds';
  }
  const length = description.trim().length;
  if (length === 0) return 'short_description is required: one or two sentences saying what the value holds';
  if (description.length > MAX_ENV_DESCRIPTION_LENGTH) {
    return `short_description is longer than ${MAX_ENV_DESCRIPTION_LENGTH} characters (${description.length})`;
  }
  return undefined;
}
