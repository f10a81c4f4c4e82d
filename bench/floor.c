/* bench/floor.c — the floor for "one supervisor process per task": two slots, each task = fork a
 * supervisor that vforks and execs /bin/true, waits for it and exits; no files, no daemon, no
 * database. Compared with the same loop doing only vfork+exec of /bin/true (what xargs does).
 * Build and run: cc -O2 bench/floor.c -o /tmp/floor && /tmp/floor 1000 0 && /tmp/floor 1000 1 */
#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec/1e9;}
static pid_t launch(int with_supervisor){
  char *av[]={"true",NULL};
  if(!with_supervisor){pid_t p=vfork(); if(!p){execv("/bin/true",av);_exit(127);} return p;}
  pid_t p=fork();
  if(!p){int st; pid_t t=vfork(); if(!t){execv("/bin/true",av);_exit(127);} waitpid(t,&st,0); _exit(0);}
  return p;
}
int main(int argc,char**argv){
  int n=atoi(argv[1]), sup=atoi(argv[2]); int started=0, done=0, running=0, st;
  double t0=now();
  while(done<n){
    while(running<2 && started<n){launch(sup); started++; running++;}
    if(wait(&st)>0){done++; running--;}
  }
  printf("%s: %d tasks in %.2f s\n", sup?"with a supervisor per task":"task only (xargs-like)", n, now()-t0);
}
