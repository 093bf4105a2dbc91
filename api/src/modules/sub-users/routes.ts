// Sub-users (docs/adr/0037): named proxy users of an account, each with its own
// proxy credentials, traffic limits per product and caps. The customer's routes (/api/v1/sub-users)
// and the operator's (/admin/v1/accounts/:id/sub-users) share the repo, the schemas and context.ts;
// one file per route in routes/, each with its tests; this file only lists them. Gateways learn
// every change from the database's triggers (change_log), nothing is called here.
import type { RouteDef } from '#api/http/route.ts';
import type { SubUsersDeps } from './context.ts';
import { listSubUsersRoute } from './routes/list.ts';
import { createSubUserRoute } from './routes/create.ts';
import { getSubUserRoute } from './routes/get.ts';
import { updateSubUserRoute } from './routes/update.ts';
import { deleteSubUserRoute } from './routes/delete.ts';
import { subUserUsageRoute } from './routes/usage.ts';
import { adminListSubUsersRoute } from './routes/admin-list.ts';
import { adminCreateSubUserRoute } from './routes/admin-create.ts';
import { adminUpdateSubUserRoute } from './routes/admin-update.ts';
import { adminDeleteSubUserRoute } from './routes/admin-delete.ts';

export function subUserRoutes(deps: SubUsersDeps): RouteDef[] {
  return [
    listSubUsersRoute(deps),
    createSubUserRoute(deps),
    getSubUserRoute(deps),
    updateSubUserRoute(deps),
    deleteSubUserRoute(deps),
    subUserUsageRoute(deps),
  ];
}

export function adminSubUserRoutes(deps: SubUsersDeps): RouteDef[] {
  return [
    adminListSubUsersRoute(deps),
    adminCreateSubUserRoute(deps),
    adminUpdateSubUserRoute(deps),
    adminDeleteSubUserRoute(deps),
  ];
}
