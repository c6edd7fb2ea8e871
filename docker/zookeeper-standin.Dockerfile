# A STAND-IN for the official zookeeper:3.8 image, for machines that reach no image registry
# (scripts/container-check builds it when ZOOKEEPER_IMAGE is not set). Use the official image
# wherever you can pull it; this one only has to serve docker/compose.yaml's test cluster.
#
# Debian's zookeeper package (3.8) on a Debian bookworm base, run as the official image runs
# it by default: standalone, client port 2181, data in the volume /data, as a non-root user.
#
#   docker build -f docker/zookeeper-standin.Dockerfile \
#       --build-arg BASE_IMAGE=local/debian-python:3.11-bookworm -t local/zookeeper:3.8 docker

ARG BASE_IMAGE=local/debian-python:3.11-bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
    && apt-get install -y --no-install-recommends zookeeper default-jre-headless \
    && rm -rf /var/lib/apt/lists/* \
    && printf '%s\n' tickTime=2000 dataDir=/data clientPort=2181 \
        4lw.commands.whitelist=srvr,ruok admin.enableServer=false > /etc/zookeeper/conf/zoo.cfg \
    && mkdir /data && chown zookeeper:zookeeper /data
USER zookeeper
VOLUME ["/data"]
EXPOSE 2181
CMD ["java", "-cp", "/etc/zookeeper/conf:/usr/share/java/*", \
     "org.apache.zookeeper.server.ZooKeeperServerMain", "/etc/zookeeper/conf/zoo.cfg"]
