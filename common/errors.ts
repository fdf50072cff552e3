/**
 * Stable type names of every failure that crosses Temporal (`ApplicationFailure.type`). Callers, tests and
 * the Web UI match on these strings, so they never change once published.
 */
export const ErrorType = {
  AgentNotFound: 'Agent.NotFound',
  ThreadStaleEpoch: 'Thread.StaleEpoch',
  ThreadNotFound: 'Thread.NotFound',
  ModelRateLimited: 'Model.RateLimited',
  ModelUnavailable: 'Model.Unavailable',
  ModelTimeout: 'Model.Timeout',
  ModelConflict: 'Model.Conflict',
  ModelBadRequest: 'Model.BadRequest',
  ModelAuthFailed: 'Model.AuthFailed',
  ModelNotFound: 'Model.NotFound',
  ModelUnprocessable: 'Model.Unprocessable',
  ModelScriptExhausted: 'Model.ScriptExhausted',
  ModelInvalidReply: 'Model.InvalidReply',
  ModelUnknownProvider: 'Model.UnknownProvider',
  /** A model call found its turn's token budget spent (docs/guides/budgets.md): it stopped before asking. */
  BudgetExhausted: 'Budget.Exhausted',
  /** A model call under a dollar budget whose model has no price (`BATON_MODEL_PRICES`): its cost could not count. */
  BudgetUnpriced: 'Budget.Unpriced',
  /** A typed agent's answers did not match its `output` schema, and the repairs it allows were used up. */
  OutputInvalid: 'Output.Invalid',
  /** A replay's call did not match the recorded run (docs/guides/evals.md): the replay stopped there. */
  EvalDiverged: 'Eval.Diverged',
  TurnFailed: 'Turn.Failed',
  /** The turn's own workflow code threw (a bug, or input it cannot handle): the turn fails instead of retrying. */
  TurnCodeFailed: 'Turn.CodeFailed',
  InvalidInput: 'Input.Invalid',
  /**
   * A decision on an approval without a valid proof (activities/decision-proofs.ts) reached a worker that holds a
   * decision key: it is not written, and the approval stays pending.
   */
  ApprovalUnauthorized: 'Approval.Unauthorized',
  /** A local activity's attempt that would begin past its schedule-to-close deadline (`refuseAttemptPastDeadline`). */
  ActivityPastDeadline: 'Activity.PastDeadline',
} as const;

export type ErrorTypeName = (typeof ErrorType)[keyof typeof ErrorType];
