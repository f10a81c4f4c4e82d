/* fuzz_config — the daemon's settings (daemon/config.c): $DROVER_HOME/drover.conf and the
 * `drover daemon --KEY VALUE` flags, then the `gpus` allow-list the daemon applies with them.
 *
 * The input is the file, then optionally a NUL byte and the flags, one per NUL-separated part
 * (argv[0] is "daemon"). config_load reads the file by name from the home directory it is given,
 * so the file is a real one, rewritten for each input in a temp dir of its own that is removed at
 * exit. Beyond the sanitizers, an accepted configuration is checked against the table's ranges.
 */
#include "fuzz.h"
#include "daemon/config.h"
#include "gpu/gpu.h"

#include <fcntl.h>
#include <stdbool.h>

#define FUZZ_MAX_ARGS 16

static char home[64], conf[96];

static void fuzz_fail(const char *what)
{
    fprintf(stderr, "fuzz_config: %s\n", what);
    abort();
}

static void fuzz_at_exit(void)
{
    unlink(conf);
    rmdir(home);
}

static void fuzz_check(const struct daemon_config *cfg)
{
    if (cfg->aging_ms < 0 || cfg->grace_ms <= 0 || cfg->sample_ms <= 0 || cfg->health_ms <= 0)
        fuzz_fail("a duration out of range");
    if (cfg->busy_low < 0 || cfg->busy_high > 100 || cfg->busy_low > cfg->busy_high ||
        cfg->claim_margin < 0 || cfg->claim_margin > 100)
        fuzz_fail("a percentage out of range");
    if (!(cfg->oom_factor > 1 && cfg->oom_factor <= 100))
        fuzz_fail("oom-factor out of range");
    if ((cfg->gpus && !cfg->gpus[0]) || (cfg->metrics && !cfg->metrics[0]))
        fuzz_fail("an empty string setting");
    if (cfg->default_retries < 0 || cfg->default_retries > 1000 || cfg->ndefault_backoff < 1 ||
        cfg->ndefault_backoff > 8)
        fuzz_fail("default-retries or default-backoff out of range");
    for (int i = 0; i < cfg->ndefault_backoff; i++)
        if (cfg->default_backoff[i] < 0)
            fuzz_fail("a negative default-backoff");
}

static bool fuzz_newline_flag(char **argv, size_t argc)
{
    for (size_t i = 0; i < argc; i++)
        if (strchr(argv[i], '\n') != NULL)
            return true;
    return false;
}

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    const char *base = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
    snprintf(home, sizeof home, "%s/drover-fuzz-config.XXXXXX", base);
    if (mkdtemp(home) == NULL)
        fatalx("fuzz_config: cannot create a temp dir in %s", base);
    snprintf(conf, sizeof conf, "%s/drover.conf", home);
    atexit(fuzz_at_exit);
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t file_len = fuzz_first_len(data, size);
    char *buf, *part[FUZZ_MAX_ARGS + 1];
    size_t n = file_len < size ? fuzz_split(data + file_len + 1, size - file_len - 1, &buf,
                                            part + 1, FUZZ_MAX_ARGS)
                               : (buf = NULL, 0);
    int fd = open(conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0 || (file_len > 0 && write(fd, data, file_len) != (ssize_t)file_len) ||
        close(fd) < 0)
        fatalx("fuzz_config: cannot write %s", conf);
    part[0] = "daemon";
    struct daemon_config cfg;
    char *err = NULL;
    if (config_load(&cfg, home, (int)n + 1, part, &err) == 0) {
        fuzz_check(&cfg);
        if (cfg.gpus != NULL) { /* what daemon_machine does with it */
            static struct gpu_inventory inv;
            const char *why;
            if (gpu_parse_fake("4x16G", &inv, &why) < 0)
                fatalx("fuzz_config: %s", why);
            for (int i = 0; i < inv.count; i++)
                snprintf(inv.gpu[i].uuid, sizeof inv.gpu[i].uuid, "GPU-%d%d-%04x", i, i, 0xab + i);
            char *why_list = NULL;
            gpu_filter(&inv, cfg.gpus, &why_list);
            free(why_list);
        }
    } else if (err == NULL || (strchr(err, '\n') != NULL && !fuzz_newline_flag(part, n + 1))) {
        fuzz_fail("an error that is not one line"); /* unless a flag's own value had one */
    }
    free(err);
    config_free(&cfg);
    free(buf);
    return 0;
}
