/**
 * Signed decisions. Anyone who reaches the Temporal frontend can send a turn's `decideApproval` Update, so an
 * approval's decision counts only when it carries a proof that its decider holds the deployment's decision key
 * (`BATON_DECISION_KEY`): an HMAC-SHA256, under that key, of exactly what it decides: which approval of which
 * conversation, and which way. The workflow never sees the key (it would be in its history); the activity that
 * writes the decision checks the proof (`closeApproval`), and the client SDK makes it (`connect({ decisionKey })`).
 *
 * A proof binds the decision, not who made it or why: `decidedBy` and `reason` are the key holder's record. A proof
 * seen in a history is one for an approval already decided that way, so it decides nothing new.
 */
import crypto from 'node:crypto';

/** What a proof covers. */
export interface ProvenDecision {
  readonly rootThreadId: string;
  readonly approvalId: string;
  readonly approve: boolean;
}

/** The version prefix of a proof: a later scheme gets another, and a worker refuses one it does not know. */
export const DECISION_PROOF_PREFIX = 'v1.';
/** The length of a `v1.` proof: the prefix and 32 bytes of base64url. */
export const DECISION_PROOF_CHARS = DECISION_PROOF_PREFIX.length + 43;

/**
 * The proof of `decision` under `key`: `v1.` and the base64url HMAC-SHA256 of the canonical JSON
 * `[rootThreadId, approvalId, approve]` (an array: no key order to agree on, and no field can run into the next).
 */
export function decisionProof(key: string, decision: ProvenDecision): string {
  const message = JSON.stringify([decision.rootThreadId, decision.approvalId, decision.approve]);
  return DECISION_PROOF_PREFIX + crypto.createHmac('sha256', key).update(message, 'utf8').digest('base64url');
}

/**
 * Whether `proof` is the proof of `decision` under `key`, compared in constant time. Anything else (missing, not a
 * string, of another version or length, a proof of another decision) is `false`.
 */
export function decisionProofMatches(key: string, decision: ProvenDecision, proof: unknown): boolean {
  if (typeof proof !== 'string' || proof.length !== DECISION_PROOF_CHARS) return false;
  const expected = Buffer.from(decisionProof(key, decision), 'utf8');
  const given = Buffer.from(proof, 'utf8');
  // Equal lengths in characters can differ in bytes (a character outside ASCII).
  return given.length === expected.length && crypto.timingSafeEqual(given, expected);
}
