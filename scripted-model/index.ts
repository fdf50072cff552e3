/**
 * The scripted model: an OpenAI-compatible HTTP server that answers each agent from a script (YAML or JSON,
 * docs/architecture.md §7), so agents can be tested deterministically and the demo runs offline. The answering step
 * is chosen by the `x-baton-agent` header and the number of assistant messages in the request; scripted
 * failures are counted per `x-baton-thread`, so concurrent and retried threads replay the same way.
 *
 * ```ts
 * const model = await startScriptedModelServer({ script: loadScript('agents/demo.script.yaml') });
 * const openai = new OpenAI({ baseURL: model.baseURL, apiKey: 'scripted', maxRetries: 0 });
 * ```
 */
export type {
  AnsweringStep,
  CallStep,
  CallsStep,
  FailStep,
  SayStep,
  Script,
  ScriptStep,
  StepSelection,
} from './script';
export {
  ScriptError,
  ScriptedModelError,
  describeAgents,
  loadScript,
  parseScript,
  scriptSchema,
  selectStep,
  validateScript,
} from './script';
export type { ScriptedModelLogEntry, ScriptedModelServer, ScriptedModelServerOptions } from './server';
export { NonLoopbackHostError, SCRIPTED_MODEL_ID, startScriptedModelServer } from './server';
