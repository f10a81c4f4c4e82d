/* fuzz_trace — what `drover simulate` reads (sim/trace.c): job traces in the three formats,
 * node lists, and the small specs (--cluster, --format, --limits, --policy).
 *
 * The first byte of the input says what the rest is (one newline after it is skipped, so that
 * corpus files read well):
 *   a  a trace, format guessed from its header      i  itp      l  alibaba2023      c  csv
 *   n  a node list                                  x  the specs: --cluster, --format, --limits
 *                                                      and --policy values, all given the text
 * In upper case (A, I, L, C) the trace is read with skip_bad_rows. Any other byte picks one of
 * these by its value. The file is a memfd.
 *
 * Beyond the sanitizers, what trace.h promises is checked: a trace that reads has jobs, sorted
 * by submit time then line, with durations and GPU counts >= 0, gpu_milli in 1..1000 and types
 * that exist; a node list has nodes of 0..64 GPUs. A trace of at most FUZZ_SIM_JOBS jobs is then
 * replayed (sim_run, the drover policy on 2x8:80G, exact limits): what reads must simulate.
 */
#include "fuzz.h"
#include "sim/sim.h"
#include "sim/trace.h"

#include <ctype.h>

#define FUZZ_SIM_JOBS 64

static struct fuzz_file file;

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_trace: %s\n", what);
    abort();
}

static void fuzz_simulate(const struct sim_trace *trace)
{
    struct core_node nodes[2];
    struct sim_config config;
    struct sim_result result;
    const char *why;
    char *err = NULL;
    memset(nodes, 0, sizeof nodes);
    memset(&config, 0, sizeof config);
    for (int i = 0; i < 2; i++) {
        nodes[i].ngpus = 8;
        for (int g = 0; g < 8; g++)
            nodes[i].gpu_mem[g] = 80ULL << 30;
    }
    if (sim_policy_apply("drover", &config, &why) < 0 ||
        sim_limits_parse("exact", &config.limits, &config.limit_factor, &why) < 0)
        fatalx("fuzz_trace: %s", why);
    config.trace = trace;
    config.nodes = nodes;
    config.nnodes = 2;
    config.gpu_mem = 80ULL << 30;
    sim_run(&config, &result, &err);
    sim_result_free(&result); /* holds first_unfit even when the run failed */
    free(err);
}

static void fuzz_trace(enum sim_format format, bool skip_bad_rows)
{
    struct sim_types types = {0};
    struct sim_trace trace;
    char *err = NULL;
    if (sim_trace_read(file.path, format, skip_bad_rows, &types, &trace, &err) == 0) {
        if (trace.n == 0 || (trace.first_bad != NULL) != (trace.skipped_bad > 0))
            fuzz_fail("a trace without jobs, or a bad-row count that disagrees");
        for (size_t i = 0; i < trace.n; i++) {
            const struct sim_job *j = &trace.jobs[i];
            if (j->duration_ms < 0 || j->gpus < 0 || j->gpu_milli < 1 || j->gpu_milli > 1000 ||
                (types.n < 64 && (j->gpu_types >> types.n) != 0) || j->id == NULL)
                fuzz_fail("a job out of range");
            if (i > 0 && (j[-1].submit_ms > j->submit_ms ||
                          (j[-1].submit_ms == j->submit_ms && j[-1].line > j->line)))
                fuzz_fail("jobs not sorted by submit time, then line");
        }
        if (trace.n <= FUZZ_SIM_JOBS)
            fuzz_simulate(&trace);
        sim_trace_free(&trace);
    } else if (err == NULL) {
        fuzz_fail("a failed read without a reason");
    }
    free(err);
    sim_types_free(&types);
}

static void fuzz_nodes(void)
{
    struct sim_types types = {0};
    struct sim_nodes nodes;
    char *err = NULL;
    if (sim_nodes_read(file.path, &types, &nodes, &err) == 0) {
        if (nodes.n < 1)
            fuzz_fail("a node list without nodes");
        for (int i = 0; i < nodes.n; i++)
            if (nodes.v[i].ngpus < 0 || nodes.v[i].ngpus > 64 || nodes.v[i].type < 0 ||
                nodes.v[i].type >= types.n)
                fuzz_fail("a node out of range");
        sim_nodes_free(&nodes);
    } else if (err == NULL) {
        fuzz_fail("a failed read without a reason");
    }
    free(err);
    sim_types_free(&types);
}

static void fuzz_specs(const uint8_t *data, size_t size)
{
    char *s = fuzz_string(data, fuzz_first_len(data, size));
    const char *why;
    int nodes, gpus;
    uint64_t mem;
    enum sim_format format;
    enum sim_limits limits;
    double factor;
    struct sim_config config;
    if (sim_cluster_parse(s, &nodes, &gpus, &mem, &why) == 0 &&
        (nodes < 1 || nodes > 100000 || gpus < 1 || gpus > 64))
        fuzz_fail("a cluster out of range");
    sim_format_parse(s, &format, &why);
    if (sim_limits_parse(s, &limits, &factor, &why) == 0 && limits == SIM_LIMITS_FACTOR &&
        !(factor > 0))
        fuzz_fail("a limit factor that is not positive");
    memset(&config, 0, sizeof config);
    sim_policy_apply(s, &config, &why);
    free(s);
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    fuzz_file_open(&file, "trace");
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static const char modes[] = "ailcnx";
    if (size == 0)
        return 0;
    int c = tolower(data[0]);
    bool skip = isupper(data[0]);
    if (strchr(modes, c) == NULL || c == 0)
        c = modes[data[0] % 6];
    data++, size--;
    if (size > 0 && data[0] == '\n')
        data++, size--;
    if (c == 'x') {
        fuzz_specs(data, size);
        return 0;
    }
    fuzz_file_set(&file, data, size);
    if (c == 'n')
        fuzz_nodes();
    else
        fuzz_trace(c == 'a' ? SIM_FORMAT_AUTO : c == 'i' ? SIM_FORMAT_ITP
                   : c == 'l'                 ? SIM_FORMAT_ALIBABA2023
                                              : SIM_FORMAT_CSV,
                   skip);
    return 0;
}
