/** Capabilities every agent has without declaring them. */
export const UNIVERSAL_CAPABILITIES = ['think', 'list_capabilities', 'ask_human'] as const;

export type UniversalCapability = (typeof UNIVERSAL_CAPABILITIES)[number];

export function isUniversalCapability(name: string): name is UniversalCapability {
  return (UNIVERSAL_CAPABILITIES as readonly string[]).includes(name);
}
