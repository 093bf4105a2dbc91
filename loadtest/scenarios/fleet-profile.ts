// The fleet scenario's sizes, full and smoke: read by the scenario (fleet.ts) and its judge
// (fleet-judge.ts).
export type FleetProfile = ReturnType<typeof fleetProfile>;
export const fleetProfile = (smoke: boolean) =>
  smoke
    ? {
        duration: 30,
        scale: 2,
        size: 16_384,
        budgetB: 20_000_000,
        exhaustStart: 8,
        killAt: 12,
        revocations: 5,
      }
    : {
        duration: 120,
        scale: 4,
        size: 65_536,
        budgetB: 150_000_000,
        exhaustStart: 45,
        killAt: 50,
        revocations: 30,
      };
