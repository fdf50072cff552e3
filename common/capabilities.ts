/** Capabilities every agent has without declaring them. */
export const UNIVERSAL_CAPABILITIES = [
  'think',
  'list_capabilities',
  'ask_human',
  'wait',
  'store_env_data',
  'get_env_data',
  'list_env_data',
  'update_env_data',
  'delete_env_data',
] as const;

export type UniversalCapability = (typeof UNIVERSAL_CAPABILITIES)[number];

export function isUniversalCapability(name: string): name is UniversalCapability {
  return (UNIVERSAL_CAPABILITIES as readonly string[]).includes(name);
}
