// The floor of a pushed message (README, Live boards): the CPU time of one
// process writing a LEN-byte frame to each of W loopback TCP sockets every
// 100 ms (the reader: a child process draining them with epoll).
//   gcc -O2 -o /tmp/floor benches/loopback_write_floor.c && /tmp/floor [W] [ROUNDS] [LEN]
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <sys/socket.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
static double cpu(void){struct rusage r;getrusage(RUSAGE_SELF,&r);return r.ru_utime.tv_sec+r.ru_stime.tv_sec+(r.ru_utime.tv_usec+r.ru_stime.tv_usec)/1e6;}
int main(int argc,char**argv){
  int W=argc>1?atoi(argv[1]):1000, R=argc>2?atoi(argv[2]):50, LEN=argc>3?atoi(argv[3]):300;
  int l=socket(AF_INET,SOCK_STREAM,0);struct sockaddr_in a={0};a.sin_family=AF_INET;a.sin_addr.s_addr=htonl(0x7f000001);
  bind(l,(void*)&a,sizeof a);listen(l,4096);socklen_t al=sizeof a;getsockname(l,(void*)&a,&al);
  int *cfd=malloc(W*sizeof(int)),*sfd=malloc(W*sizeof(int));
  for(int i=0;i<W;i++){cfd[i]=socket(AF_INET,SOCK_STREAM,0);int one=1;setsockopt(cfd[i],IPPROTO_TCP,TCP_NODELAY,&one,4);connect(cfd[i],(void*)&a,sizeof a);sfd[i]=accept(l,0,0);setsockopt(sfd[i],IPPROTO_TCP,TCP_NODELAY,&one,4);fcntl(sfd[i],F_SETFL,O_NONBLOCK);}
  pid_t p=fork();
  if(p==0){int ep=epoll_create1(0);for(int i=0;i<W;i++){struct epoll_event e={.events=EPOLLIN,.data.fd=cfd[i]};epoll_ctl(ep,EPOLL_CTL_ADD,cfd[i],&e);}
    struct epoll_event ev[256];char b[65536];long got=0,want=(long)W*R*LEN;
    while(got<want){int n=epoll_wait(ep,ev,256,2000);if(n<=0)break;for(int i=0;i<n;i++){ssize_t k=read(ev[i].data.fd,b,sizeof b);if(k>0)got+=k;}}
    _exit(0);}
  char *msg=malloc(LEN);memset(msg,'x',LEN);
  struct timespec ts={0,100*1000*1000};
  double c0=cpu();long n=0;
  for(int r=0;r<R;r++){for(int i=0;i<W;i++){if(write(sfd[i],msg,LEN)==LEN)n++;} nanosleep(&ts,0);}
  double c1=cpu();
  printf("W=%d rounds=%d len=%d: %.2f us CPU per write (%ld writes)\n",W,R,LEN,(c1-c0)*1e6/n,n);
  waitpid(p,0,0);return 0;}
