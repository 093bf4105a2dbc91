// Target statistics (docs/adr/0026): how long they are kept, read by the API's date check and the
// worker's retention job alike.

/** Days of statistics kept, today (UTC) included. */
export const TARGET_RETENTION_DAYS = 30;
