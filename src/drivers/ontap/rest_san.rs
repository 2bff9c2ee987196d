//! The REST lookups of SAN objects the `OntapApi` implementation in `rest_calls.rs` acts on:
//! a LUN's UUID, its maps (with the UUIDs a map delete is addressed by), an igroup's UUID.

use reqwest::Method;

use super::api::ApiResult;
use super::rest::{Req, RestClient};
use super::rest_calls::{gone_ok, one_uuid};
use super::rest_wire::str_at;

impl RestClient {
    pub(super) async fn lun_uuid(&self, svm: &str, path: &str) -> ApiResult<Option<String>> {
        let svm_uuid = self.svm_uuid(svm).await?;
        let records = self
            .collect(
                Req::new("/storage/luns")
                    .q("svm.uuid", svm_uuid)
                    .q("name", path)
                    .q("fields", "uuid"),
            )
            .await?;
        one_uuid(&records, "name", path, "uuid")
    }

    /// The maps of `path` (to `igroup` only, when given): (igroup name, LUN UUID, igroup
    /// UUID, LUN id).
    pub(super) async fn lun_maps_of(
        &self,
        svm: &str,
        path: &str,
        igroup: Option<&str>,
    ) -> ApiResult<Vec<(String, String, String, i32)>> {
        let svm_uuid = self.svm_uuid(svm).await?;
        let mut req = Req::new("/protocols/san/lun-maps")
            .q("svm.uuid", svm_uuid)
            .q("lun.name", path);
        if let Some(g) = igroup {
            req = req.q("igroup.name", g);
        }
        let records = self
            .collect(req.q(
                "fields",
                "lun.name,lun.uuid,igroup.name,igroup.uuid,logical_unit_number",
            ))
            .await?;
        Ok(records
            .iter()
            .filter(|r| {
                let (l, g) = (str_at(r, "lun.name"), str_at(r, "igroup.name"));
                (l.is_empty() || l == path) && igroup.is_none_or(|want| g.is_empty() || g == want)
            })
            .map(|r| {
                let g = str_at(r, "igroup.name");
                (
                    if g.is_empty() {
                        igroup.unwrap_or_default()
                    } else {
                        g
                    }
                    .to_string(),
                    str_at(r, "lun.uuid").to_string(),
                    str_at(r, "igroup.uuid").to_string(),
                    r["logical_unit_number"].as_i64().unwrap_or(0) as i32,
                )
            })
            .collect())
    }

    /// `DELETE /protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}`; an absent map is success.
    pub(super) async fn lun_map_delete(&self, lun: &str, igroup: &str) -> ApiResult<()> {
        let req = Req::new(format!("/protocols/san/lun-maps/{lun}/{igroup}"));
        gone_ok(self.change(Method::DELETE, &req, None).await)
    }

    /// An igroup's UUID by name, `None` when there is none.
    pub(super) async fn igroup_uuid(&self, svm: &str, igroup: &str) -> ApiResult<Option<String>> {
        let records = self
            .collect(
                Req::new("/protocols/san/igroups")
                    .q("svm.uuid", self.svm_uuid(svm).await?)
                    .q("name", igroup)
                    .q("fields", ""),
            )
            .await?;
        one_uuid(&records, "name", igroup, "uuid")
    }
}
