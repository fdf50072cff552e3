/**
 * All of Baton's I/O, as Temporal activities built by factories from their dependencies. Workflows proxy the
 * `Activities` type; they never import values from here.
 */
import { createModelActivities, type ModelActivityOptions } from './model';
import { createThreadActivities } from './threads';

export type ActivityDependencies = ModelActivityOptions;

export function createActivities(deps: ActivityDependencies) {
  return {
    ...createThreadActivities({ pool: deps.pool }),
    ...createModelActivities(deps),
  };
}

export type Activities = ReturnType<typeof createActivities>;
