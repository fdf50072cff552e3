/**
 * Sets `key` in `map`, first dropping the entry set longest ago when `map` already holds `max` other keys: an
 * in-process cache or memo that must not grow without end. (A `Map` keeps insertion order.)
 */
export function setBounded<K, V>(map: Map<K, V>, key: K, value: V, max: number): void {
  if (!map.has(key) && map.size >= max) {
    const oldest = map.keys().next();
    if (oldest.done !== true) map.delete(oldest.value);
  }
  map.set(key, value);
}
