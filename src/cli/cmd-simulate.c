/* drover simulate: replay a job trace through the scheduler core (sim/) and print what the
 * schedule was like. Runs in the client: no daemon, no state directory. */
#include "cli/cli.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "sim/sim.h"
#include "util/parse.h"
#include "util/xalloc.h"

#define SIM_DEFAULT_GPU_MEM (80ULL << 30)

static const struct cmd_opt simulate_opts[] = {
    {"trace", 't', true, false, "the trace file (required)"},
    {"format", 'f', true, false, "itp, alibaba2023 or csv (default: guessed from the header)"},
    {"cluster", 'c', true, false, "NODESxGPUS[:MEM], e.g. 12x8 or 12x8:80G"},
    {"nodes", 'n', true, false, "a node list (sn,cpu_milli,memory_mib,gpu,model)"},
    {"policy", 'p', true, false, "fifo, backfill, drover or las (default drover)"},
    {"preempt-cost", 0, true, false, "las: work a preempted job loses (default 60s; 0 = none)"},
    {"las-thresholds", 0, true, false,
     "las: queue thresholds in GPU-hours, ascending, comma-separated (default 1,10)"},
    {"las-min-run", 0, true, false, "las: minimum run before a preemption (default 10m)"},
    {"las-mrl", 0, true, false,
     "las: preempt only a job the finished ones say has F x the waiter's left (default 1)"},
    {"las-protect-wait", 0, true, false,
     "las: a job that has waited this long in all keeps its GPUs (default 12h; 0 = no)"},
    {"las-protect-ratio", 0, true, false,
     "las: a protected run is protected R x the job's wait (default 1; 0 = whole run)"},
    {"las-starve-total", 0, true, false,
     "las: promote a job that has waited this long in all (default 100h; 0 = no)"},
    {"las-starve", 0, true, false,
     "las: promote a job that waited K x its last run (default 0 = never)"},
    {"las-starve-max", 0, true, false,
     "las: promote a job that waited this long, if less than K x its last run (default: none)"},
    {"las-starve-reset", 0, false, false,
     "las: a promotion restarts the job's attained service instead of protecting its run"},
    {"las-protect-run", 0, true, false,
     "las: protect a promoted job's run only this long (default: see --las-protect-ratio)"},
    {"las-max-preempt", 0, true, false,
     "las: a job preempted N times is not preempted again (default 0: no bound)"},
    {"limits", 'l', true, false, "time limits jobs give: none (default), exact or xF"},
    {"whole-gpus", 0, false, false, "give a job that asks for a fraction of a GPU whole GPUs"},
    {"skip-bad-rows", 0, false, false, "count and skip rows that cannot be read"},
    {"schedule-out", 'o', true, false, "write job_id,submit,start,end,node,gpus rows to FILE"},
    {"why", 0, true, false,
     "print, each time it changes, why job ID waits (seconds, job, reason) to stderr"},
    {"fair-share", 0, true, false, "on or off: fair share between users (default: on for "
                                   "drover, off for fifo and backfill)"},
    {"users", 0, true, false, "assign N synthetic users (user1..userN) to the jobs"},
    {"heavy-user-share", 0, true, false, "with --users: user1's share of the jobs (default "
                                         "1/N)"},
    {"seed", 0, true, false, "with --users: the seed of the assignment (default 1)"},
    {"json", 0, false, false, "print the results as JSON"},
    {NULL, 0, false, false, NULL},
};
_Static_assert(sizeof simulate_opts / sizeof simulate_opts[0] <= CMD_MAX_OPTS + 1,
               "drover simulate has at most CMD_MAX_OPTS options");

static const char *const simulate_format_names[] = {"itp", "alibaba2023", "csv"};

/* The simulated machine, from --cluster or --nodes. */
struct simulate_machine {
    struct core_node *nodes;
    int nnodes;
    char **names;            /* from --nodes; NULL otherwise */
    struct sim_nodes list;
    uint64_t gpu_mem;
    bool from_list;
};

static void simulate_machine_free(struct simulate_machine *m)
{
    free(m->nodes);
    free(m->names);
    sim_nodes_free(&m->list);
}

static int simulate_machine(const struct cmd_entry *cmd, const struct cmd_args *args,
                            struct sim_types *types, struct simulate_machine *m)
{
    const char *cluster = cmd_opt(cmd, args, "cluster"), *list = cmd_opt(cmd, args, "nodes");
    const char *why;
    if ((cluster == NULL) == (list == NULL))
        return cmd_usage_error(cmd, "give one of --cluster NODESxGPUS or --nodes FILE");
    m->gpu_mem = SIM_DEFAULT_GPU_MEM;
    if (cluster != NULL) {
        int nnodes, ngpus;
        uint64_t gpu_mem;
        if (sim_cluster_parse(cluster, &nnodes, &ngpus, &gpu_mem, &why) == -1)
            return cmd_usage_error(cmd, "--cluster \"%s\": %s", cluster, why);
        if (gpu_mem > 0)
            m->gpu_mem = gpu_mem;
        m->nnodes = nnodes;
        m->nodes = xcalloc((size_t)nnodes, sizeof *m->nodes);
        for (int i = 0; i < nnodes; i++) {
            m->nodes[i].ngpus = ngpus;
            for (int g = 0; g < ngpus; g++)
                m->nodes[i].gpu_mem[g] = m->gpu_mem;
        }
        return EXIT_OK;
    }
    char *err;
    if (sim_nodes_read(list, types, &m->list, &err) == -1) {
        cmd_usage_error(cmd, "%s", err);
        free(err);
        return EXIT_USAGE;
    }
    m->from_list = true;
    m->nnodes = m->list.n;
    m->nodes = xcalloc((size_t)m->nnodes, sizeof *m->nodes);
    m->names = xcalloc((size_t)m->nnodes, sizeof *m->names);
    for (int i = 0; i < m->nnodes; i++) {
        const struct sim_node *in = &m->list.v[i];
        struct core_node *node = &m->nodes[i];
        node->ngpus = in->ngpus;
        for (int g = 0; g < in->ngpus; g++) {
            node->gpu_mem[g] = m->gpu_mem;
            node->gpu_type[g] = (uint8_t)in->type;
        }
        node->cpus = in->cpu_milli;
        node->mem = in->mem_bytes;
        m->names[i] = in->name;
    }
    return EXIT_OK;
}

static void simulate_print(const char *trace_path, const char *format, const char *policy,
                           const char *limits, const struct simulate_machine *m,
                           const struct sim_trace *trace, const struct sim_result *r)
{
    char a[32], b[32], c[32], d[32];
#define DUR(x, buf) format_duration((int64_t)((x) * 1000), buf, sizeof buf)
    printf("trace        %s (%s)\n", trace_path, format);
    printf("cluster      %d nodes, %d GPUs; policy %s; limits %s\n", m->nnodes, r->ngpus, policy,
           limits);
    printf("jobs         %zu simulated, %zu skipped", r->jobs,
           trace->skipped_pending + trace->skipped_bad + r->skipped_unfit);
    if (trace->skipped_pending + trace->skipped_bad + r->skipped_unfit > 0)
        printf(" (%zu never ran, %zu unreadable, %zu fit no node)", trace->skipped_pending,
               trace->skipped_bad, r->skipped_unfit);
    printf("\n");
    printf("makespan     %s   (lower bound %s: GPU-time / GPUs)\n", DUR(r->makespan, a),
           DUR(r->bound_makespan, b));
    printf("JCT          avg %s  p50 %s  p95 %s  p99 %s", DUR(r->jct_avg, a), DUR(r->jct_p50, b),
           DUR(r->jct_p95, c), DUR(r->jct_p99, d));
    printf("   (floor %s: mean duration)\n", DUR(r->bound_jct, a));
    printf("wait         avg %s  p99 %s  max %s\n", DUR(r->wait_avg, a), DUR(r->wait_p99, b),
           DUR(r->wait_max, c));
    printf("utilisation  %.1f%% of GPU-time\n", 100 * r->utilisation);
    printf("running      %.1f jobs at once on average; %.1f while jobs waited (%s of it)\n",
           r->avg_running, r->avg_running_contended, DUR(r->contended, a));
    if (r->preempt_enabled)
        printf("preemptions  %zu: %.2f per job on average, median %g, max %zu\n",
               r->preemptions, r->preempt_mean, r->preempt_p50, r->preempt_max);
    printf("scheduler    %llu passes, %.2f s in core/ (%.1f us a pass)\n",
           (unsigned long long)r->passes, r->sched_seconds,
           r->passes > 0 ? 1e6 * r->sched_seconds / (double)r->passes : 0);
    if (r->nusers > 0) {
        printf("\n%-16s %8s %10s %10s %10s %10s\n", "user", "jobs", "GPU-hours", "avg JCT",
               "avg wait", "max wait");
        for (size_t i = 0; i < r->nusers; i++) {
            const struct sim_user_result *u = &r->users[i];
            printf("%-16s %8zu %10.1f %10s %10s %10s\n", u->name, u->jobs, u->gpu_hours,
                   DUR(u->jct_avg, a), DUR(u->wait_avg, b), DUR(u->wait_max, c));
        }
    }
#undef DUR
}

/* The per-user figures, or null when the trace names no users. */
static json_t *simulate_users_json(const struct sim_result *r)
{
    if (r->nusers == 0)
        return json_null();
    json_t *users = json_array();
    for (size_t i = 0; i < r->nusers; i++) {
        const struct sim_user_result *u = &r->users[i];
        json_t *o = json_pack("{s:s, s:I, s:f, s:f, s:f, s:f}", "user", u->name, "jobs",
                              (json_int_t)u->jobs, "gpu_hours", u->gpu_hours, "jct_avg_s",
                              u->jct_avg, "wait_avg_s", u->wait_avg, "wait_max_s", u->wait_max);
        if (o == NULL)
            fatalx("simulate: json_pack failed (user %s)", u->name);
        json_array_append_new(users, o);
    }
    return users;
}

static void simulate_print_json(const char *trace_path, const char *format, const char *policy,
                                const char *limits, bool fair_share,
                                const struct simulate_machine *m, const struct sim_trace *trace,
                                const struct sim_result *r)
{
    json_t *out = json_pack(
        "{s:s, s:s, s:s, s:s, s:i, s:i, s:I, s:{s:I, s:I, s:I},"
        " s:f, s:{s:f, s:f, s:f, s:f}, s:{s:f, s:f, s:f}, s:f, s:f,"
        " s:f, s:f, s:{s:f, s:f}, s:{s:I, s:f}}",
        "trace", trace_path, "format", format, "policy", policy, "limits", limits, "nodes",
        m->nnodes, "gpus", r->ngpus, "jobs", (json_int_t)r->jobs, "skipped", "never_ran",
        (json_int_t)trace->skipped_pending, "unreadable", (json_int_t)trace->skipped_bad,
        "unfit", (json_int_t)r->skipped_unfit, "makespan_s", r->makespan, "jct_s", "avg",
        r->jct_avg, "p50", r->jct_p50, "p95", r->jct_p95, "p99", r->jct_p99, "wait_s", "avg",
        r->wait_avg, "p99", r->wait_p99, "max", r->wait_max, "utilisation", r->utilisation,
        "avg_running", r->avg_running, "contended_s", r->contended, "avg_running_contended",
        r->avg_running_contended, "bounds", "makespan_s", r->bound_makespan, "jct_s",
        r->bound_jct, "scheduler", "passes", (json_int_t)r->passes, "seconds", r->sched_seconds);
    if (out == NULL)
        fatalx("simulate: json_pack failed");
    json_object_set_new(out, "fair_share", json_boolean(fair_share));
    if (r->preempt_enabled) {
        json_t *p = json_pack("{s:I, s:f, s:f, s:I}", "total", (json_int_t)r->preemptions,
                              "mean", r->preempt_mean, "median", r->preempt_p50, "max",
                              (json_int_t)r->preempt_max);
        if (p == NULL)
            fatalx("simulate: json_pack failed (preemptions)");
        json_object_set_new(out, "preemptions", p);
    }
    json_object_set_new(out, "users", simulate_users_json(r));
    out_json(out);
    json_decref(out);
}

/* --users, --heavy-user-share, --seed and --fair-share. */
struct simulate_users {
    long long n;          /* 0 = the trace's own users */
    double heavy_share;
    uint64_t seed;
};

static int simulate_users_opts(const struct cmd_entry *cmd, const struct cmd_args *args,
                               struct core_policy *policy, struct simulate_users *users)
{
    const char *fair = cmd_opt(cmd, args, "fair-share"), *n = cmd_opt(cmd, args, "users");
    const char *share = cmd_opt(cmd, args, "heavy-user-share"), *seed = cmd_opt(cmd, args, "seed");
    const char *why;
    memset(users, 0, sizeof *users);
    users->seed = 1;
    if (fair != NULL) {
        if (strcmp(fair, "on") != 0 && strcmp(fair, "off") != 0)
            return cmd_usage_error(cmd, "--fair-share \"%s\": expected on or off", fair);
        policy->fair_share = strcmp(fair, "on") == 0;
    }
    if (n == NULL) {
        if (share != NULL || seed != NULL)
            return cmd_usage_error(cmd, "--heavy-user-share and --seed need --users N");
        return EXIT_OK;
    }
    if (parse_int(n, 1, 1000, &users->n, &why) < 0)
        return cmd_usage_error(cmd, "--users \"%s\": %s", n, why);
    users->heavy_share = 1.0 / (double)users->n;
    if (share != NULL) {
        char *end;
        users->heavy_share = strtod(share, &end);
        if (end == share || *end != '\0' || !(users->heavy_share >= 0 && users->heavy_share <= 1))
            return cmd_usage_error(cmd, "--heavy-user-share \"%s\": expected a number from 0 "
                                        "to 1", share);
    }
    long long s;
    if (seed != NULL && parse_int(seed, 0, LLONG_MAX, &s, &why) < 0)
        return cmd_usage_error(cmd, "--seed \"%s\": %s", seed, why);
    if (seed != NULL)
        users->seed = (uint64_t)s;
    return EXIT_OK;
}

/* A las knob's number >= 0 (at most 1e6) into *out; -1 after a usage error. */
static int simulate_las_number(const struct cmd_entry *cmd, const char *flag, const char *text,
                               double *out)
{
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || !(v >= 0 && v <= 1e6)) {
        cmd_usage_error(cmd, "--%s \"%s\": expected a number >= 0", flag, text);
        return -1;
    }
    *out = v;
    return 0;
}

/* A las knob's duration into *out (unchanged when text is NULL); -1 after a usage error. */
static int simulate_las_duration(const struct cmd_entry *cmd, const char *flag,
                                 const char *text, int64_t *out)
{
    const char *why;
    if (text == NULL || parse_duration(text, out, &why) == 0)
        return 0;
    cmd_usage_error(cmd, "--%s \"%s\": %s", flag, text, why);
    return -1;
}

/* --las-thresholds: ascending GPU-hours into the policy's thresholds (GPU-seconds). */
static int simulate_las_thresholds(const struct cmd_entry *cmd, const char *th,
                                   struct core_policy *policy)
{
    const char *why;
    if (parse_hours(th, policy->las_threshold, CORE_LAS_MAX, &policy->las_nthresholds, &why) < 0)
        return cmd_usage_error(cmd, "--las-thresholds \"%s\": %s (at most %d)", th, why,
                               CORE_LAS_MAX);
    return EXIT_OK;
}

/* --preempt-cost and the las knobs (only with --policy las). */
static int simulate_las_opts(const struct cmd_entry *cmd, const struct cmd_args *args,
                             struct sim_config *config)
{
    static const char *const durations[] = {
        "las-min-run", "las-starve-max", "las-starve-total", "las-protect-wait",
        "las-protect-run",
    };
    static const char *const numbers[] = {
        "las-starve", "las-mrl", "las-protect-ratio", "las-max-preempt",
    };
    static const char *const flags[] = {"las-thresholds", "las-starve-reset", "preempt-cost"};
    struct core_policy *policy = &config->policy;
    int64_t *duration_out[] = {
        &policy->las_min_run_ms, &policy->las_starve_max_ms, &policy->las_starve_total_ms,
        &policy->las_protect_wait_ms, &policy->las_protect_run_ms,
    };
    double *number_out[] = {&policy->las_starve_k, &policy->las_mrl_factor,
                            &policy->las_protect_ratio, NULL};
    const char *cost = cmd_opt(cmd, args, "preempt-cost");
    const char *why;
    config->preempt_cost_ms = 60000;
    if (!policy->las) {
        bool any = false;
        for (size_t i = 0; i < sizeof durations / sizeof *durations; i++)
            any |= cmd_opt(cmd, args, durations[i]) != NULL;
        for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++)
            any |= cmd_opt(cmd, args, numbers[i]) != NULL;
        for (size_t i = 0; i < sizeof flags / sizeof *flags; i++)
            any |= cmd_opt(cmd, args, flags[i]) != NULL;
        return any ? cmd_usage_error(cmd, "--preempt-cost and --las-* need --policy las")
                   : EXIT_OK;
    }
    if (cost != NULL && strcmp(cost, "0") == 0)
        config->preempt_cost_ms = 0;
    else if (cost != NULL && parse_duration(cost, &config->preempt_cost_ms, &why) < 0)
        return cmd_usage_error(cmd, "--preempt-cost \"%s\": %s", cost, why);
    for (size_t i = 0; i < sizeof durations / sizeof *durations; i++) {
        const char *text = cmd_opt(cmd, args, durations[i]);
        /* "0" turns a knob off (parse_duration wants a unit). */
        if (text != NULL && strcmp(text, "0") == 0)
            *duration_out[i] = 0;
        else if (simulate_las_duration(cmd, durations[i], text, duration_out[i]) < 0)
            return EXIT_USAGE;
    }
    for (size_t i = 0; i < sizeof numbers / sizeof *numbers; i++) {
        const char *text = cmd_opt(cmd, args, numbers[i]);
        double v;
        if (text == NULL)
            continue;
        if (simulate_las_number(cmd, numbers[i], text, &v) < 0)
            return EXIT_USAGE;
        if (number_out[i] != NULL)
            *number_out[i] = v;
        else if (v != (int)v)
            return cmd_usage_error(cmd, "--%s \"%s\": expected a whole number", numbers[i],
                                   text);
        else
            policy->las_max_preempt = (int)v;
    }
    policy->las_starve_reset = cmd_opt(cmd, args, "las-starve-reset") != NULL;
    const char *th = cmd_opt(cmd, args, "las-thresholds");
    return th != NULL ? simulate_las_thresholds(cmd, th, policy) : EXIT_OK;
}

static int simulate_exec(const struct cmd_entry *cmd, struct cmd_args *args)
{
    const char *path = cmd_opt(cmd, args, "trace"), *why;
    const char *policy_name = cmd_opt(cmd, args, "policy");
    const char *limits_text = cmd_opt(cmd, args, "limits");
    const char *format_text = cmd_opt(cmd, args, "format");
    const char *out_path = cmd_opt(cmd, args, "schedule-out");
    struct sim_config config;
    memset(&config, 0, sizeof config);
    enum sim_format format = SIM_FORMAT_AUTO;

    if (path == NULL)
        return cmd_usage_error(cmd, "--trace FILE is required");
    size_t bad = cmd_opt(cmd, args, "json") ? utf8_check(path) : 0;
    if (bad > 0) /* --json names it in the output, and JSON carries only UTF-8 */
        return cmd_usage_error(cmd, "--trace: not valid UTF-8 (byte %zu)", bad);
    if (policy_name == NULL)
        policy_name = "drover";
    if (limits_text == NULL)
        limits_text = "none";
    if (sim_policy_apply(policy_name, &config, &why) == -1)
        return cmd_usage_error(cmd, "--policy \"%s\": %s", policy_name, why);
    if (sim_limits_parse(limits_text, &config.limits, &config.limit_factor, &why) == -1)
        return cmd_usage_error(cmd, "--limits \"%s\": %s", limits_text, why);
    if (format_text != NULL && sim_format_parse(format_text, &format, &why) == -1)
        return cmd_usage_error(cmd, "--format \"%s\": %s", format_text, why);
    struct simulate_users users;
    int rc = simulate_users_opts(cmd, args, &config.policy, &users);
    if (rc != EXIT_OK)
        return rc;
    rc = simulate_las_opts(cmd, args, &config);
    if (rc != EXIT_OK)
        return rc;

    struct sim_types types;
    struct simulate_machine machine;
    struct sim_trace trace;
    struct sim_result result;
    memset(&types, 0, sizeof types);
    memset(&machine, 0, sizeof machine);
    memset(&trace, 0, sizeof trace);
    memset(&result, 0, sizeof result);
    FILE *out = NULL;
    char *err = NULL;
    rc = simulate_machine(cmd, args, &types, &machine);
    if (rc != EXIT_OK)
        goto out;
    rc = EXIT_USAGE;
    if (sim_trace_read(path, format, cmd_opt(cmd, args, "skip-bad-rows") != NULL, &types, &trace,
                       &err) == -1) {
        cmd_usage_error(cmd, "%s", err);
        goto out;
    }
    if (users.n > 0 &&
        sim_trace_assign_users(&trace, (int)users.n, users.heavy_share, users.seed, &why) == -1) {
        cmd_usage_error(cmd, "--users %lld --heavy-user-share %g: %s", users.n,
                        users.heavy_share, why);
        goto out;
    }
    if (trace.skipped_bad > 0)
        fprintf(stderr, "drover simulate: skipped %zu unreadable rows; the first: %s\n",
                trace.skipped_bad, trace.first_bad);
    if (out_path != NULL) {
        out = strcmp(out_path, "-") == 0 ? stdout : fopen(out_path, "w");
        if (out == NULL) {
            cmd_usage_error(cmd, "--schedule-out %s: %s", out_path, strerror(errno));
            goto out;
        }
    }
    config.trace = &trace;
    config.nodes = machine.nodes;
    config.nnodes = machine.nnodes;
    config.node_names = (const char *const *)machine.names;
    config.gpu_mem = machine.gpu_mem;
    config.whole_gpus |= cmd_opt(cmd, args, "whole-gpus") != NULL;
    config.use_types = machine.from_list;
    config.use_host = machine.from_list;
    config.schedule_out = out;
    config.why_job = cmd_opt(cmd, args, "why");
    config.why_out = stderr;
    if (sim_run(&config, &result, &err) == -1) {
        fprintf(stderr, "drover simulate: %s\n", err);
        rc = EXIT_FAILED;
        goto out;
    }
    if (result.skipped_unfit > 0)
        fprintf(stderr, "drover simulate: skipped %zu jobs that fit no node; the first: %s\n",
                result.skipped_unfit, result.first_unfit);
    if (format == SIM_FORMAT_AUTO)
        format = trace.format;
    const char *fname = simulate_format_names[format];
    if (out != stdout) {
        if (cmd_opt(cmd, args, "json"))
            simulate_print_json(path, fname, policy_name, limits_text,
                                config.policy.fair_share, &machine, &trace, &result);
        else
            simulate_print(path, fname, policy_name, limits_text, &machine, &trace, &result);
    }
    rc = EXIT_OK;
out:
    if (out != NULL && out != stdout && fclose(out) != 0 && rc == EXIT_OK) {
        fprintf(stderr, "drover simulate: --schedule-out %s: %s\n", out_path, strerror(errno));
        rc = EXIT_FAILED;
    }
    free(err);
    sim_result_free(&result);
    sim_trace_free(&trace);
    simulate_machine_free(&machine);
    sim_types_free(&types);
    return rc;
}

const struct cmd_entry cmd_simulate = {
    .name = "simulate",
    .usage = "simulate --trace FILE (--cluster NxG[:MEM] | --nodes FILE) [--format F] "
             "[--policy fifo|backfill|drover|las] [--preempt-cost D] [--las-thresholds H,H] "
             "[--las-min-run D] [--las-mrl F] [--las-protect-wait D] [--las-protect-ratio R] "
             "[--las-starve-total D] [--las-starve K] [--las-starve-max D] [--las-starve-reset] "
             "[--las-protect-run D] [--las-max-preempt N] [--limits none|exact|xF] "
             "[--whole-gpus] "
             "[--skip-bad-rows] [--schedule-out FILE] [--why JOB] [--fair-share on|off] "
             "[--users N [--heavy-user-share F] [--seed S]] [--json]",
    .summary = "replay a GPU-cluster trace through the scheduler and measure the schedule",
    .opts = simulate_opts,
    .min_args = 0,
    .max_args = 0,
    .exec = simulate_exec,
};
