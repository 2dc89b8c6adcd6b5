export { route as handler } from './handler/router';
