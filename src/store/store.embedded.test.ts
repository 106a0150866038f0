import { storeSuite } from './store-suite.ts';
import { embeddedBackend } from './test-support.ts';

storeSuite(embeddedBackend());
