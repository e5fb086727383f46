// informer.js - one informer of @kubernetes/client-node (its ListWatch, as
// makeInformer builds it) on a plain-HTTP server without authentication,
// driven by tests/e2e/clients.py.
//
//   node informer.js --server URL --path /api/v1/pods
//        [--label-selector S] [--field-selector S] [--user-agent UA]
//        [--restart-ms N]     after an error, start the informer again in N ms
//                             (the usual way to use it: client-node stops an
//                             informer on any error but 410); -1: never
//
// stdout: one JSON object per line, each with "event" and "t" (seconds):
//   started   start() came back without an error: listed (unless it still had
//             a resourceVersion) and watching; count (objects), resourceVersion,
//             restarts (how many times it was started again after an error)
//   connect   the informer (re)connects: before each list or watch
//   add / update / delete    name, namespace, resourceVersion
//   error     message, status (HTTP status, when there is one), code
//             (Node's error code, e.g. ERR_STREAM_PREMATURE_CLOSE)
//   dump      answer to "dump ID": id, keys (sorted "namespace/name"),
//             rv ({key: resourceVersion}), resourceVersion (the informer's)
//   stopped   answer to "stop"; the process then exits 0
// stdin: one command per line, "dump ID" or "stop".  End of input stops it.

import { createInterface } from 'node:readline';
import * as k8s from '@kubernetes/client-node';

function parseArgs(argv) {
    const o = { restartMs: 1000 };
    const names = {
        '--server': 'server',
        '--path': 'path',
        '--label-selector': 'labelSelector',
        '--field-selector': 'fieldSelector',
        '--user-agent': 'userAgent',
        '--restart-ms': 'restartMs',
    };
    for (let i = 0; i < argv.length; i += 2) {
        const key = names[argv[i]];
        if (!key || i + 1 >= argv.length) {
            throw new Error(`bad argument ${argv[i]}`);
        }
        o[key] = key === 'restartMs' ? Number(argv[i + 1]) : argv[i + 1];
    }
    if (!o.server || !o.path) {
        throw new Error('--server and --path are required');
    }
    return o;
}

function emit(event, fields) {
    process.stdout.write(JSON.stringify({ event, t: Date.now() / 1000, ...fields }) + '\n');
}

function errorFields(err) {
    const f = { message: String((err && err.message) || err) };
    if (err && typeof err.statusCode === 'number') {
        f.status = err.statusCode;
    } else if (err && typeof err.code === 'number') {
        f.status = err.code; // ApiException of the generated clients
    }
    if (err && typeof err.code === 'string') {
        f.code = err.code;
    }
    return f;
}

// The hub sees the client's User-Agent as its component: a subclass adds the
// header where client-node applies its own options, for the generated API
// calls (the list) and for the watch alike.
class AgentKubeConfig extends k8s.KubeConfig {
    constructor(userAgent) {
        super();
        this.userAgent = userAgent;
    }

    async applyOptions(opts) {
        await super.applyOptions(opts);
        if (this.userAgent) {
            opts.headers = { ...(opts.headers || {}), 'User-Agent': this.userAgent };
        }
    }
}

// The typed list call of client-node's generated API for a collection path.
const RESOURCES = {
    '/v1/pods': ['CoreV1Api', 'Pod', false],
    '/v1/services': ['CoreV1Api', 'Service', false],
    '/v1/configmaps': ['CoreV1Api', 'ConfigMap', false],
    '/v1/endpoints': ['CoreV1Api', 'Endpoints', false],
    '/v1/events': ['CoreV1Api', 'Event', false],
    '/v1/secrets': ['CoreV1Api', 'Secret', false],
    '/v1/serviceaccounts': ['CoreV1Api', 'ServiceAccount', false],
    '/v1/nodes': ['CoreV1Api', 'Node', true],
    '/v1/namespaces': ['CoreV1Api', 'Namespace', true],
    'discovery.k8s.io/v1/endpointslices': ['DiscoveryV1Api', 'EndpointSlice', false],
    'coordination.k8s.io/v1/leases': ['CoordinationV1Api', 'Lease', false],
    'apps/v1/deployments': ['AppsV1Api', 'Deployment', false],
};

function listFunction(kc, path, labelSelector, fieldSelector) {
    const m =
        path.match(/^\/api\/(v1)(?:\/namespaces\/([^/]+))?\/([a-z]+)$/) ||
        path.match(/^\/apis\/([^/]+\/[^/]+)(?:\/namespaces\/([^/]+))?\/([a-z]+)$/);
    const core = m && path.startsWith('/api/');
    const entry = m && RESOURCES[`${core ? '/v1' : m[1]}/${m[3]}`];
    if (!entry || (entry[2] && m[2])) {
        throw new Error(`no typed list call for ${path}`);
    }
    const [apiName, kind, clusterScoped] = entry;
    const api = kc.makeApiClient(k8s[apiName]);
    const params = {};
    if (labelSelector !== undefined) {
        params.labelSelector = labelSelector;
    }
    if (fieldSelector !== undefined) {
        params.fieldSelector = fieldSelector;
    }
    if (clusterScoped) {
        return () => api[`list${kind}`](params);
    }
    if (m[2]) {
        return () => api[`listNamespaced${kind}`]({ ...params, namespace: m[2] });
    }
    return () => api[`list${kind}ForAllNamespaces`](params);
}

function keyOf(obj) {
    const md = obj.metadata || {};
    return `${md.namespace || ''}/${md.name || ''}`;
}

function objectFields(obj) {
    const md = (obj && obj.metadata) || {};
    return { name: md.name, namespace: md.namespace || '', resourceVersion: md.resourceVersion };
}

async function main() {
    const opts = parseArgs(process.argv.slice(2));
    const kc = new AgentKubeConfig(opts.userAgent);
    kc.loadFromOptions({
        clusters: [{ name: 'hub', server: opts.server, skipTLSVerify: true }],
        users: [{ name: 'anonymous' }],
        contexts: [{ name: 'hub', cluster: 'hub', user: 'anonymous' }],
        currentContext: 'hub',
    });
    const list = listFunction(kc, opts.path, opts.labelSelector, opts.fieldSelector);
    const informer =
        opts.fieldSelector === undefined
            ? k8s.makeInformer(kc, opts.path, list, opts.labelSelector)
            : new k8s.ListWatch(opts.path, new k8s.Watch(kc), list, false, opts.labelSelector,
                opts.fieldSelector);
    let stopping = false;
    let errors = 0;
    let restarts = 0;
    // start() resolves without an error after a failed list or watch too:
    // "started" only when no error came in meanwhile
    const start = async () => {
        const before = errors;
        await informer.start();
        if (errors === before && !stopping) {
            emit('started', {
                count: informer.list().length,
                resourceVersion: informer.latestResourceVersion(),
                restarts,
            });
        }
    };
    informer.on(k8s.ADD, (o) => emit('add', objectFields(o)));
    informer.on(k8s.UPDATE, (o) => emit('update', objectFields(o)));
    informer.on(k8s.DELETE, (o) => emit('delete', objectFields(o)));
    informer.on(k8s.CONNECT, () => emit('connect', {}));
    informer.on(k8s.ERROR, (err) => {
        errors++;
        if (stopping) {
            return; // the abort of stop() itself
        }
        emit('error', errorFields(err));
        if (!stopping && opts.restartMs >= 0) {
            setTimeout(() => {
                if (!stopping) {
                    restarts++;
                    start().catch((e) => emit('error', errorFields(e)));
                }
            }, opts.restartMs);
        }
    });

    const stop = async () => {
        if (stopping) {
            return;
        }
        stopping = true;
        await informer.stop();
        emit('stopped', {});
        process.exit(0);
    };
    const lines = createInterface({ input: process.stdin });
    lines.on('line', (line) => {
        const [cmd, id] = line.trim().split(/\s+/);
        if (cmd === 'dump') {
            const objs = informer.list();
            const rv = {};
            for (const o of objs) {
                rv[keyOf(o)] = o.metadata.resourceVersion;
            }
            emit('dump', {
                id: id || '',
                keys: Object.keys(rv).sort(),
                rv,
                resourceVersion: informer.latestResourceVersion(),
            });
        } else if (cmd === 'stop') {
            stop();
        }
    });
    lines.on('close', stop);

    await start();
}

process.on('unhandledRejection', (err) => emit('error', { ...errorFields(err), unhandled: true }));
main().catch((err) => {
    emit('error', { ...errorFields(err), fatal: true });
    process.exit(2);
});
