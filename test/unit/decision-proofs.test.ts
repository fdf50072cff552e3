/**
 * Signed decisions (activities/decision-proofs.ts): a proof is `v1.` and the HMAC-SHA256 of exactly what it decides,
 * under the deployment's decision key; it matches that decision under that key and nothing else, and anything
 * malformed is no proof.
 */
import assert from 'node:assert/strict';
import crypto from 'node:crypto';
import { test } from 'node:test';
import { DECISION_PROOF_CHARS, decisionProof, decisionProofMatches } from '../../activities/decision-proofs';

const KEY = 'k'.repeat(16) + '0123456789abcdef0123';
const OTHER_KEY = 'o'.repeat(40);
const decision = { rootThreadId: 'ops-1', approvalId: 'a1', approve: true };

test('decision proofs: v1. and the base64url HMAC-SHA256 of the canonical JSON [root, approval, approve]', () => {
  const proof = decisionProof(KEY, decision);
  const mac = crypto.createHmac('sha256', KEY).update('["ops-1","a1",true]', 'utf8').digest('base64url');
  assert.equal(proof, `v1.${mac}`);
  assert.equal(proof.length, DECISION_PROOF_CHARS);
  // The same decision always gets the same proof: a client and a worker compute it apart.
  assert.equal(decisionProof(KEY, { approve: true, approvalId: 'a1', rootThreadId: 'ops-1' }), proof);
  assert.ok(decisionProofMatches(KEY, decision, proof));
});

test('decision proofs: a proof of another approval, root or way, or under another key, does not match', () => {
  const proof = decisionProof(KEY, decision);
  for (const [what, other] of [
    ['another approval', { ...decision, approvalId: 'a2' }],
    ['another root', { ...decision, rootThreadId: 'ops-2' }],
    ['the opposite decision', { ...decision, approve: false }],
    // Fields that would run together in a plain concatenation are told apart.
    ['a root and approval split elsewhere', { ...decision, rootThreadId: 'ops-1a', approvalId: '1' }],
  ] as const) {
    assert.equal(decisionProofMatches(KEY, other, proof), false, what);
    assert.notEqual(decisionProof(KEY, other), proof, what);
  }
  assert.equal(decisionProofMatches(OTHER_KEY, decision, proof), false, 'another key');
  assert.equal(decisionProofMatches(KEY, decision, decisionProof(OTHER_KEY, decision)), false, "another key's proof");
});

test('decision proofs: anything malformed is no proof, never an error', () => {
  const proof = decisionProof(KEY, decision);
  const malformed: unknown[] = [
    undefined,
    null,
    '',
    42,
    { proof },
    [proof],
    proof.slice(3), // without its version
    `v2.${proof.slice(3)}`, // a version this worker does not know
    proof.slice(0, -1), // cut
    `${proof}=`, // padded
    `${proof.slice(0, -1)}é`, // as long in characters, longer in bytes
    `v1.${'A'.repeat(43)}`,
    proof.toUpperCase(),
  ];
  for (const given of malformed) {
    assert.equal(decisionProofMatches(KEY, decision, given), false, JSON.stringify(given));
  }
});
