import { storeSuite } from './store-suite.ts';
import { postgresBackend } from './test-support.ts';

// Needs the PostgreSQL server at 127.0.0.1:5432 (or PHONEBRIDGE_TEST_DATABASE_URL); it creates
// and drops a pb_test_<random> database.
storeSuite(postgresBackend());
