import { ApplicationFailure } from '@temporalio/common';
import { APIConnectionError, APIError, APIUserAbortError } from 'openai';
import { ErrorType, type ErrorTypeName } from '../common/errors';

/** HTTP statuses worth retrying: the same request can succeed later (docs/architecture.md §4, invariant 7). */
const RETRYABLE: Record<number, ErrorTypeName> = {
  408: ErrorType.ModelTimeout,
  409: ErrorType.ModelConflict,
  429: ErrorType.ModelRateLimited,
};

/** Statuses where retrying cannot help: the request itself is wrong. */
const NON_RETRYABLE: Record<number, ErrorTypeName> = {
  400: ErrorType.ModelBadRequest,
  401: ErrorType.ModelAuthFailed,
  403: ErrorType.ModelAuthFailed,
  404: ErrorType.ModelNotFound,
  422: ErrorType.ModelUnprocessable,
};

/** The delay a server asked for with `retry-after-ms` or `retry-after` (seconds or an HTTP date), in ms. */
export function retryAfterMs(headers: Headers | undefined, now = Date.now()): number | undefined {
  const ms = Number(headers?.get('retry-after-ms'));
  if (headers?.get('retry-after-ms') && Number.isFinite(ms) && ms >= 0) return ms;
  const value = headers?.get('retry-after');
  if (!value) return undefined;
  const seconds = Number(value);
  if (Number.isFinite(seconds) && seconds >= 0) return seconds * 1000;
  const date = Date.parse(value);
  return Number.isNaN(date) ? undefined : Math.max(0, date - now);
}

/** The endpoint a failed call went to, named in its failure: with several providers, whose key or server failed. */
export interface ModelErrorEndpoint {
  /** The provider's name, or `default` for the default endpoint. */
  readonly provider: string;
  /** The model name sent. */
  readonly model: string;
}

/**
 * Turns an error from the `openai` client into a typed `ApplicationFailure`, so Temporal's retry policy (not the
 * client's) decides what happens: 408/409/429/5xx and connection errors retry, honouring `retry-after`; other
 * 4xx fail the activity at once. The message names the endpoint when it is given, the same way for every provider.
 * Cancellation is passed through unchanged for the SDK to report.
 */
export function classifyModelError(error: unknown, endpoint?: ModelErrorEndpoint): unknown {
  if (error instanceof APIUserAbortError) return error;
  if (!(error instanceof APIError)) return error;
  const status: number | undefined = (error as APIError).status;
  const headers: Headers | undefined = (error as APIError).headers;
  const where = endpoint === undefined ? '' : ` (provider '${endpoint.provider}', model '${endpoint.model}')`;
  const detail = `model endpoint answered ${status ?? 'no response'}${where}: ${error.message}`;
  if (error instanceof APIConnectionError || status === undefined) {
    return ApplicationFailure.create({ type: ErrorType.ModelUnavailable, message: detail });
  }
  if (error.code === 'script_exhausted') {
    return ApplicationFailure.create({
      type: ErrorType.ModelScriptExhausted,
      message: error.message,
      nonRetryable: true,
    });
  }
  const retryType = RETRYABLE[status] ?? (status >= 500 ? ErrorType.ModelUnavailable : undefined);
  if (retryType) {
    const delay = retryAfterMs(headers);
    return ApplicationFailure.create({
      type: retryType,
      message: detail,
      ...(delay === undefined ? {} : { nextRetryDelay: delay }),
    });
  }
  return ApplicationFailure.create({
    type: NON_RETRYABLE[status] ?? ErrorType.ModelBadRequest,
    message: detail,
    nonRetryable: true,
  });
}

/**
 * Failures of one model that another model of a fallback chain may not have, so the call moves to the next one at
 * once: a key refused (401/403: that provider's), a model the endpoint does not know (404). A bad request (400, 422)
 * would be as bad elsewhere; failures a retry can fix move on only after the model's attempts.
 */
export function movesToNextModelAtOnce(failure: unknown): boolean {
  if (!(failure instanceof ApplicationFailure)) return false;
  return failure.type === ErrorType.ModelAuthFailed || failure.type === ErrorType.ModelNotFound;
}
